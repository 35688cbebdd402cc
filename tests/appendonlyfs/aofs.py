"""Mount helpers for tests that run against an appendonlyfs mount.

API
---
``fuse_available() -> bool``
    True when ``/dev/fuse`` exists and ``fusermount3`` is on PATH.

``fuse_required() -> bool``
    True when the environment variable ``APPENDGUARD_REQUIRE_FUSE=1`` is set: a missing FUSE or a
    mount that cannot be made must then fail the test instead of skipping it.

``SKIP_RETURN_CODE = 77``
    Exit status a test script uses to tell ctest it skipped (set the test's SKIP_RETURN_CODE to 77).

``skip_or_fail_without_fuse(what='mount tests')``
    Call at the start of a test script: returns if FUSE is usable; otherwise prints
    "SKIP: FUSE is absent ..." and exits 77, or, when FUSE is required, prints an error and exits 1.

``mounted(binary, profile='hdfs', options=(), log=None, timeout=10.0, extra_args=())``
    Context manager yielding ``(backing_dir, mount_dir)``: two fresh temporary directories, with
    ``binary -f -o profile=PROFILE[,OPTIONS...][,log=LOG] BACKING MOUNT`` running in the background
    and the mount live. ``options`` is an iterable of ``-o`` items such as ``"short_writes=3"``;
    ``log`` is a file path for ``-o log=``. Raises ``MountError`` (with the process's stderr) if the
    process exits or the mount does not appear within ``timeout`` seconds. On exit it unmounts with
    ``fusermount3 -u`` (falling back to ``umount -l``), waits for the process and removes both
    directories. The backing directory is the ground truth: inspect files there to see exactly what
    reached the "store".

``MountError``
    Raised when a mount cannot be made.
"""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

SKIP_RETURN_CODE = 77

__all__ = ["fuse_available", "fuse_required", "skip_or_fail_without_fuse", "mounted", "MountError",
           "SKIP_RETURN_CODE"]


class MountError(RuntimeError):
    pass


def fuse_available():
    return os.path.exists("/dev/fuse") and shutil.which("fusermount3") is not None


def fuse_required():
    return os.environ.get("APPENDGUARD_REQUIRE_FUSE") == "1"


def skip_or_fail_without_fuse(what="mount tests"):
    if fuse_available():
        return
    if fuse_required():
        print(f"FAIL: FUSE is absent (/dev/fuse or fusermount3 missing) and APPENDGUARD_REQUIRE_FUSE=1: {what}",
              file=sys.stderr)
        sys.exit(1)
    print(f"SKIP: FUSE is absent (/dev/fuse or fusermount3 missing): skipping {what}")
    sys.exit(SKIP_RETURN_CODE)


def _unmount(mount_dir):
    for command in (["fusermount3", "-u", mount_dir], ["fusermount3", "-uz", mount_dir], ["umount", "-l", mount_dir]):
        if not os.path.ismount(mount_dir):
            return
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if not os.path.ismount(mount_dir):
            return
        time.sleep(0.05)


@contextlib.contextmanager
def mounted(binary, profile="hdfs", options=(), log=None, timeout=10.0, extra_args=()):
    root = tempfile.mkdtemp(prefix="aofs-")
    backing = os.path.join(root, "backing")
    mount_dir = os.path.join(root, "mnt")
    os.mkdir(backing)
    os.mkdir(mount_dir)
    opts = [f"profile={profile}", *options]
    if log is not None:
        opts.append(f"log={log}")
    command = [binary, "-f", "-o", ",".join(opts), *extra_args, backing, mount_dir]
    stderr_file = tempfile.TemporaryFile(mode="w+")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr_file)

    def stderr_text():
        stderr_file.seek(0)
        return stderr_file.read().strip()

    try:
        deadline = time.monotonic() + timeout
        while not os.path.ismount(mount_dir):
            if process.poll() is not None:
                raise MountError(f"{' '.join(command)} exited with status {process.returncode}: {stderr_text()}")
            if time.monotonic() > deadline:
                raise MountError(f"{' '.join(command)}: mount did not appear within {timeout}s: {stderr_text()}")
            time.sleep(0.01)
        yield backing, mount_dir
    finally:
        _unmount(mount_dir)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        stderr_file.close()
        if not os.path.ismount(mount_dir):
            shutil.rmtree(root, ignore_errors=True)
