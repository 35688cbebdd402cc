"""A tmpfs under the e2e temporary directory whose files can carry the kernel's append-only attribute
(chattr +a, FS_APPEND_FL; tmpfs supports it since Linux 6.0), for the e2e tests of kernel append-only
files.

    why = missing_prerequisite()        # None, or why this machine cannot run them
    with tmpfs_mounted(directory): ...  # mounts, yields, clears +a on every file, unmounts
"""
import contextlib
import os
import shutil
import subprocess
import tempfile


def chattr(flag, path):
    """Runs chattr FLAG PATH; returns (exit status, output)."""
    proc = subprocess.run(["chattr", flag, path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc.returncode, proc.stdout.strip()


def is_append_only(path):
    out = subprocess.run(["lsattr", "-d", path], stdout=subprocess.PIPE, text=True, check=True).stdout
    return "a" in out.split()[0]


def _mount(directory):
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "appendguard-e2e", directory],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _unmount(directory):
    subprocess.run(["umount", directory], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    if os.path.ismount(directory):
        subprocess.run(["umount", "-l", directory], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)


def clear_attributes(directory):
    for base, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(base, name)
            if is_append_only(path):
                chattr("-a", path)


@contextlib.contextmanager
def tmpfs_mounted(directory):
    """Mounts a tmpfs on directory (which must exist); at the end clears +a and unmounts it."""
    proc = _mount(directory)
    if proc.returncode != 0:
        raise RuntimeError(f"mount -t tmpfs {directory}: {proc.stdout}")
    try:
        yield directory
    finally:
        try:
            clear_attributes(directory)
        finally:
            _unmount(directory)


def missing_prerequisite():
    """Why kernel append-only files cannot be tested here (not root, no chattr/lsattr, a tmpfs without
    FS_APPEND_FL), or None. Tries it once on a scratch tmpfs."""
    if os.geteuid() != 0:
        return "not root (mounting a tmpfs and chattr +a need root)"
    for tool in ("chattr", "lsattr", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (e2fsprogs / mount)"
    scratch = tempfile.mkdtemp(prefix="tmpfs-check-")
    try:
        with tmpfs_mounted(scratch):
            path = os.path.join(scratch, "f")
            open(path, "w").close()
            code, out = chattr("+a", path)
            if code != 0:
                return f"this kernel's tmpfs does not take chattr +a ({out})"
    except RuntimeError as error:
        return str(error)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return None
