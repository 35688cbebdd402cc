"""Whole-mount guarding and deferred preallocation on a live appendonlyfs mount, with only APPENDGUARD=1:
a file whose name no pattern matches (data.bin) is guarded because the mount is append-only; its
ftruncate preallocation never reaches the mount, and what the program did not write is filled with zeros
at close (or at exit), as a local disk would hold it. APPENDGUARD_FS=none guards by name only again."""
import json
import os

from harness import program, read_bytes, results
from e2e_support import PYTHON, MountTest, main, violations

EXPECTED = b"x" * 300 + b"\0" * 700

# Write opens of unmatched relative names after each way of changing directory (issue 27: the working
# directory's answer is cached by its identity, which every chdir, fchdir or raw chdir changes; a dirfd's
# likewise). Per open: a preallocation past the end (the library defers it on a guarded file: "ok"; the
# hdfs mount refuses it on an unguarded one: EOPNOTSUPP) and a write back at offset 0 (refused by the
# library on a guarded file; it lands on an unguarded local one: "ok").
CHDIR_CODE = r"""
import ctypes, errno, json, os, sys
outside, mount = sys.argv[1:3]
libc = ctypes.CDLL(None, use_errno=True)
def attempt(call):
    try:
        call()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
results = []
def open_write(step, name, dirfd=None):
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = os.open(name, flags, 0o644) if dirfd is None else os.open(name, flags, 0o644, dir_fd=dirfd)
    os.write(fd, b"x" * 10)
    grow = attempt(lambda: os.ftruncate(fd, 100))
    back = attempt(lambda: os.pwrite(fd, b"y", 0))
    os.close(fd)
    results.append([step, grow, back])
os.chdir(outside)
open_write("outside", "a.bin")
open_write("outside again", "b.bin")
os.chdir(mount)
open_write("chdir into the mount", "c.bin")
os.mkdir("sub")
os.chdir("sub")
open_write("chdir into a directory of the mount", "d.bin")
os.chdir(outside)
open_write("chdir out of the mount", "e.bin")
inside = os.open(mount, os.O_RDONLY | os.O_DIRECTORY)
os.fchdir(inside)
open_write("fchdir into the mount", "f.bin")
os.chdir(outside)
open_write("chdir out again", "g.bin")
if libc.syscall(80, os.fsencode(mount)) != 0:  # SYS_chdir, not libc's chdir
    raise OSError(ctypes.get_errno(), "raw chdir")
open_write("raw chdir into the mount", "h.bin")
os.chdir(os.path.dirname(mount))
open_write("chdir above the mount", os.path.basename(mount) + "/i.bin")
open_write("chdir above the mount, beside it", "j.bin")
here = os.open(outside, os.O_RDONLY | os.O_DIRECTORY)
open_write("dirfd outside", "k.bin", here)
open_write("dirfd of the mount", "l.bin", inside)
open_write("dirfd outside again", "m.bin", here)
print(json.dumps(results))
"""


class WholeMountTest(MountTest):
    def prealloc(self, runner, name, ending="close", **env):
        proc = runner([program("probe"), "prealloc", self.m(name), ending], **env)
        self.assertOk(proc)
        return results(proc.stdout), proc.stderr

    def test_unmatched_name_on_append_only_mount_is_guarded_and_zero_filled(self):
        self.mount("hdfs")
        for ending in ("close", "exit"):
            with self.subTest(ending=ending):
                r, err = self.prealloc(self.run_lib, f"data-{ending}.bin", ending)
                self.assertEqual(r["ftruncate_grow"], "0")
                self.assertEqual(r["seek_end"], "1000")
                self.assertEqual(r["write"], "300")
                self.assertEqual(r["ftruncate_cut"], "-1 errno=EOPNOTSUPP")
                self.assertEqual(r["write_past_end"], "-1 errno=EOPNOTSUPP")
                self.assertEqual(len(violations(err)), 2, err)
                self.assertEqual(read_bytes(self.b(f"data-{ending}.bin")), EXPECTED)
        self.assertNoMountRefusal()

    def test_a_change_of_directory_into_or_out_of_the_mount_is_seen_by_relative_opens(self):
        self.mount("hdfs")
        outside = self.path("outside")
        os.makedirs(outside)
        proc = self.run_lib([PYTHON, "-c", CHDIR_CODE, outside, self.mnt])
        self.assertOk(proc)
        on_mount = {"chdir into the mount", "chdir into a directory of the mount", "fchdir into the mount",
                    "raw chdir into the mount", "chdir above the mount", "dirfd of the mount"}
        steps = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertEqual(len(steps), 13, steps)
        for step, grow, back in steps:
            with self.subTest(step=step):
                if step in on_mount:
                    self.assertEqual(grow, "ok", f"{step}: the file on the mount was not guarded")
                    self.assertNotEqual(back, "ok")
                else:
                    self.assertEqual(back, "ok", f"{step}: a local file was guarded")
                    self.assertEqual(grow, "ok")
        self.assertEqual(len(violations(proc.stderr)), len(on_mount), proc.stderr)

    def test_without_library_the_mount_refuses_the_preallocation(self):
        self.mount("hdfs")
        r, _ = self.prealloc(self.run_plain, "data.bin")
        self.assertEqual(r["ftruncate_grow"], "-1 errno=EOPNOTSUPP")
        self.assertTrue(any(line.startswith("refused truncate path=/data.bin") for line in self.log_lines()),
                        self.log_lines())

    def test_by_name_only_leaves_the_file_unguarded(self):
        self.mount("hdfs")
        r, err = self.prealloc(self.run_lib, "data.bin", APPENDGUARD_FS="none")
        self.assertEqual(r["ftruncate_grow"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(violations(err), [])
        self.assertTrue(any(line.startswith("refused truncate path=/data.bin") for line in self.log_lines()))


if __name__ == "__main__":
    main()
