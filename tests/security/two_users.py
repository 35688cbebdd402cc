"""Two local users for the security tests: created as root (useradd), commands run as either of them.

The attacker is an ordinary user with a shell and nothing more; the victim is another (or root, the
user who reads the logs and publishes the page). Files shared between them live under a directory every
user can traverse (mode 0755), made fresh per test.
"""
import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

ATTACKER = "agattacker"
VICTIM = "agvictim"
SKIP = 77


def require_root():
    if os.geteuid() != 0:
        print("SKIP: the two-user tests create their users and need root (CI runs as root)")
        sys.exit(SKIP)


def ensure_user(name):
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", "--user-group", name], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return pwd.getpwnam(name)


def users():
    require_root()
    return ensure_user(ATTACKER), ensure_user(VICTIM)


def run_as(user, argv, env=None, umask=0o022, **kwargs):
    """Runs argv as `user` (a pwd entry), with only that user's ids and groups."""
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("timeout", 120)
    environment = {"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"}
    environment.update(env or {})
    return subprocess.run(argv, user=user.pw_uid, group=user.pw_gid, extra_groups=[], umask=umask,
                          env=environment, cwd="/", **kwargs)


def python_as(user, code, *args, env=None, umask=0o022, **kwargs):
    return run_as(user, ["/usr/bin/python3", "-c", code, *args], env=env, umask=umask, **kwargs)


@contextlib.contextmanager
def shared_root():
    """A fresh directory (0755, root's) that every user can traverse; removed afterwards."""
    root = tempfile.mkdtemp(prefix="agsec-", dir="/tmp")
    os.chmod(root, 0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
