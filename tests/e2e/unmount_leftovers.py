"""Cleanup for the e2e tests: unmounts every mount under ROOT (the e2e temporary directory), whatever its
type: appendonlyfs (fuse.appendonlyfs), rclone (fuse.rclone) with fusermount3 -u, the kernel append-only
test's tmpfs with umount -l.

usage: unmount_leftovers.py ROOT
Exit 0 when nothing was mounted there; 1 (after unmounting) when a test left a mount behind.
"""
import os
import subprocess
import sys


def mounts_under(root):
    root = os.path.realpath(root).rstrip("/") + "/"
    found = []
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 3:
                continue
            point = fields[1].encode().decode("unicode_escape")  # /proc/mounts escapes spaces as \040
            if point.startswith(root):
                found.append((point, fields[2]))
    return found


def main():
    root = sys.argv[1]
    if not os.path.isdir(root):
        return 0
    leftovers = mounts_under(root)
    for point, fstype in sorted(leftovers, key=lambda m: -len(m[0])):
        print(f"left behind: {point} ({fstype}); unmounting")
        for command in (["fusermount3", "-u", point], ["fusermount3", "-uz", point], ["umount", "-l", point]):
            if subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
                break
    remaining = mounts_under(root)
    for point, _ in remaining:
        print(f"still mounted: {point}", file=sys.stderr)
    if not leftovers:
        print(f"no mount left under {root}")
    return 1 if leftovers else 0


if __name__ == "__main__":
    sys.exit(main())
