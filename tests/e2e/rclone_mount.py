"""A Debian rclone mount of a local directory for the e2e tests: `rclone mount BACKING MNT
--vfs-cache-mode MODE` started in the background (not --daemon, which holds the caller's stdout open),
its output in a file, with an empty configuration (the local backend needs none for a plain path).

    with rclone_mounted(root, "off") as (backing, mnt, log): ...

The mount lives under root (the e2e temporary directory), so e2e.no_mount_left_behind unmounts it if the
test is killed. The exit unmounts with fusermount3 -u (lazily if that fails) and waits for rclone.
"""
import contextlib
import os
import shutil
import subprocess
import tempfile
import time

RCLONE = shutil.which("rclone")


class RcloneError(RuntimeError):
    pass


def _unmount(mount_dir):
    for command in (["fusermount3", "-u", mount_dir], ["fusermount3", "-uz", mount_dir], ["umount", "-l", mount_dir]):
        if not os.path.ismount(mount_dir):
            return
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


@contextlib.contextmanager
def rclone_mounted(root, cache_mode="off", extra_args=(), timeout=20.0, on_mount=None):
    """Yields (backing, mount, log path). on_mount(mount) is called once mounted (for signal handlers)."""
    if RCLONE is None:
        raise RcloneError("rclone is not installed")
    base = tempfile.mkdtemp(prefix=f"rclone-{cache_mode}-", dir=root)
    backing, mount_dir = os.path.join(base, "backing"), os.path.join(base, "mnt")
    log, config = os.path.join(base, "rclone.log"), os.path.join(base, "rclone.conf")
    os.mkdir(backing)
    os.mkdir(mount_dir)
    open(config, "w").close()
    mode_args = () if cache_mode is None else ("--vfs-cache-mode", cache_mode)  # None: rclone's default/env
    command = [RCLONE, "mount", backing, mount_dir, *mode_args, "--config", config,
               "--cache-dir", os.path.join(base, "cache"), *extra_args]
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while not os.path.ismount(mount_dir):
            if process.poll() is not None:
                with open(log) as f:
                    raise RcloneError(f"{' '.join(command)} exited with status {process.returncode}: {f.read()}")
            if time.monotonic() > deadline:
                raise RcloneError(f"{' '.join(command)}: no mount within {timeout}s")
            time.sleep(0.02)
        if on_mount is not None:
            on_mount(mount_dir)
        yield backing, mount_dir, log
    finally:
        _unmount(mount_dir)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if not os.path.ismount(mount_dir):
            shutil.rmtree(base, ignore_errors=True)
