"""The stores of the conformance matrix, each mounted once per run: appendonlyfs profiles, a tmpfs whose
pre-existing files carry `chattr +a`, rclone over a local folder (cache modes off, minimal, writes), and
rclone and s3fs over a real S3 endpoint (moto's server on 127.0.0.1).

    with moto_server(python) as endpoint: ...
    with mounted_store(store, root, endpoint) as directory: ...
"""
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import e2e_support
from e2e_support import AOFS, aofs
from rclone_mount import RCLONE, rclone_mounted
from tmpfs_append_only import missing_prerequisite, tmpfs_mounted

S3FS = shutil.which("s3fs")

# key -> (label in docs/stores.md, short: the matrix's header row stays under 300 characters; kind, arguments)
STORES = {
    "aofs-hdfs": ("appendonlyfs `hdfs`", "aofs", "hdfs"),
    "aofs-s3": ("appendonlyfs `s3`", "aofs", "s3"),
    "aofs-strict": ("appendonlyfs `strict`", "aofs", "strict"),
    "aofs-volumes": ("appendonlyfs `volumes`", "aofs", "volumes"),
    "chattr": ("`chattr +a` (tmpfs)", "chattr", None),
    "rclone-off": ("rclone `off`", "rclone", ("off", ())),
    "rclone-minimal": ("rclone `minimal`", "rclone",
                       ("minimal", ("--vfs-write-back", "0s"))),
    "rclone-writes": ("rclone `writes`", "rclone",
                      ("writes", ("--vfs-write-back", "0s"))),
    "rclone-s3": ("rclone S3 `writes`", "rclone-s3",
                  ("writes", ("--vfs-write-back", "0s"))),
    "s3fs": ("s3fs (S3)", "s3fs", None),
}


class StoreMissing(RuntimeError):
    """A tool this store needs is absent (a failure under APPENDGUARD_REQUIRE_FUSE=1)."""


def _store_env():
    """Our environment without AWS_* (an AWS_CA_BUNDLE makes rclone's S3 backend refuse its HTTP transport;
    the endpoint is plain http on 127.0.0.1)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _unmount(mount_dir):
    for command in (["fusermount3", "-u", mount_dir], ["fusermount3", "-uz", mount_dir], ["umount", "-l", mount_dir]):
        if not os.path.ismount(mount_dir):
            return
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def _wait_mount(process, mount_dir, log, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not os.path.ismount(mount_dir):
        if process.poll() is not None:
            with open(log) as f:
                raise RuntimeError(f"{what} exited with status {process.returncode}: {f.read()[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: no mount within {timeout}s")
        time.sleep(0.05)


def _stop(process):
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def moto_server(python, root):
    """Runs moto's S3 server (the client Python's moto_server) on 127.0.0.1; yields its endpoint URL."""
    server = os.path.join(os.path.dirname(python), "moto_server")
    if not os.path.exists(server):
        raise StoreMissing(f"{server} is missing (pip install 'moto[server]' into the client Python)")
    port = _free_port()
    log = os.path.join(root, "moto.log")
    with open(log, "w") as out:
        process = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(endpoint + "/", timeout=2).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    with open(log) as f:
                        raise RuntimeError(f"moto_server did not start: {f.read()[-2000:]}")
                time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        _stop(process)


def make_bucket(endpoint, bucket):
    request = urllib.request.Request(f"{endpoint}/{bucket}", method="PUT")
    urllib.request.urlopen(request, timeout=10).read()


@contextlib.contextmanager
def _rclone_s3(root, endpoint, cache_mode, extra_args):
    if RCLONE is None:
        raise StoreMissing("rclone is not installed")
    make_bucket(endpoint, "rclone")
    base = tempfile.mkdtemp(prefix="rclone-s3-", dir=root)
    mount_dir, log, config = (os.path.join(base, n) for n in ("mnt", "rclone.log", "rclone.conf"))
    os.mkdir(mount_dir)
    with open(config, "w") as f:
        f.write(f"[moto]\ntype = s3\nprovider = Other\naccess_key_id = test\nsecret_access_key = test\n"
                f"endpoint = {endpoint}\nregion = us-east-1\n")
    command = [RCLONE, "mount", "moto:rclone", mount_dir, "--vfs-cache-mode", cache_mode, "--config", config,
               "--cache-dir", os.path.join(base, "cache"), *extra_args]
    with _served(command, mount_dir, log, "rclone mount (S3)"):
        yield mount_dir


@contextlib.contextmanager
def _served(command, mount_dir, log, what):
    """Runs the FUSE client `command` (its output to `log`) until mount_dir is mounted; unmounts and stops it
    at the end."""
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   env=_store_env())
    try:
        _wait_mount(process, mount_dir, log, what)
        e2e_support.ACTIVE_MOUNTS.add(mount_dir)
        yield
    finally:
        _unmount(mount_dir)
        e2e_support.ACTIVE_MOUNTS.discard(mount_dir)
        _stop(process)


@contextlib.contextmanager
def _s3fs(root, endpoint):
    if S3FS is None:
        raise StoreMissing("s3fs is not installed (Debian package s3fs)")
    make_bucket(endpoint, "s3fs")
    base = tempfile.mkdtemp(prefix="s3fs-", dir=root)
    mount_dir, log, passwd = (os.path.join(base, n) for n in ("mnt", "s3fs.log", "passwd"))
    os.mkdir(mount_dir)
    with open(passwd, "w") as f:
        f.write("test:test\n")
    os.chmod(passwd, 0o600)
    command = [S3FS, "s3fs", mount_dir, "-f", "-o",
               f"url={endpoint},use_path_request_style,passwd_file={passwd},"
               f"use_cache={os.path.join(base, 'cache')},stat_cache_expire=1"]
    with _served(command, mount_dir, log, "s3fs"):
        yield mount_dir


@contextlib.contextmanager
def mounted_store(key, root, endpoint):
    """Mounts store `key` under root; yields the directory the operations run in."""
    _, kind, arg = STORES[key]
    if kind == "aofs":
        if not AOFS or not os.path.exists(AOFS):
            raise StoreMissing("APPENDONLYFS is not the built appendonlyfs")
        with aofs.mounted(AOFS, profile=arg) as (_, mount_dir):
            e2e_support.ACTIVE_MOUNTS.add(mount_dir)
            try:
                yield mount_dir
            finally:
                e2e_support.ACTIVE_MOUNTS.discard(mount_dir)
    elif kind == "chattr":
        why = missing_prerequisite()
        if why:
            raise StoreMissing(why)
        directory = tempfile.mkdtemp(prefix="tmpfs-", dir=root)
        with tmpfs_mounted(directory):
            yield directory
    elif kind == "rclone":
        if RCLONE is None:
            raise StoreMissing("rclone is not installed")
        mode, extra = arg
        with rclone_mounted(root, mode, extra_args=extra, on_mount=e2e_support.ACTIVE_MOUNTS.add) as (_, mnt, _):
            try:
                yield mnt
            finally:
                e2e_support.ACTIVE_MOUNTS.discard(mnt)
    elif kind == "rclone-s3":
        if endpoint is None:
            raise StoreMissing("no S3 endpoint (moto_server)")
        with _rclone_s3(root, endpoint, *arg) as mnt:
            yield mnt
    elif kind == "s3fs":
        if endpoint is None:
            raise StoreMissing("no S3 endpoint (moto_server)")
        with _s3fs(root, endpoint) as mnt:
            yield mnt
    else:
        raise ValueError(kind)
