"""Shared helpers of the end-to-end tests: a fresh appendonlyfs mount per test, local reference runs and
byte-for-byte comparison of directory trees.

Environment (set by ctest, see CMakeLists.txt): APPENDGUARD_LIB, APPENDGUARD_TEST_BIN (the probe),
APPENDGUARD_TEST_PYTHON, APPENDONLYFS (the appendonlyfs binary), APPENDGUARD_E2E_BIN (the programs of
tests/e2e/programs), TMPDIR (where mounts and temporary files go), PYTHONPATH (tests/integration and
tests/appendonlyfs, for harness and aofs).
"""
import os
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for extra in (os.path.join(ROOT, "integration"), os.path.join(ROOT, "appendonlyfs")):
    if extra not in sys.path:
        sys.path.insert(0, extra)

import aofs  # noqa: E402
import harness  # noqa: E402
from harness import PYTHON, read_bytes, results, violations  # noqa: E402  (re-exported for the tests)

__all__ = ["aofs", "harness", "PYTHON", "read_bytes", "results", "violations", "AOFS", "E2E_BIN", "DCP",
           "e2e_program", "e2e_script", "files_of", "settled", "MountTest", "main"]

AOFS = os.environ.get("APPENDONLYFS", "")
E2E_BIN = os.environ.get("APPENDGUARD_E2E_BIN", "")
DCP = harness.script("dcp_consolidate.py")
SCRIPTS = os.path.join(HERE, "scripts")
ACTIVE_MOUNTS = set()  # mount points of the running test, for the SIGTERM handler


def e2e_program(name):
    return os.path.join(E2E_BIN, name)


def e2e_script(name):
    return os.path.join(SCRIPTS, name)


def files_of(directory):
    """{relative path: bytes} of every regular file under directory."""
    out = {}
    for base, _, names in os.walk(directory):
        for name in names:
            full = os.path.join(base, name)
            out[os.path.relpath(full, directory)] = read_bytes(full)
    return out


def settled(path, timeout=5.0, interval=0.1):
    """The bytes at path once two reads `interval` seconds apart agree (rclone finishes an upload after the
    close), or what is there at the timeout (None if nothing)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        data = read_bytes(path) if os.path.exists(path) else None
        if data == last and data is not None or time.monotonic() > deadline:
            return data
        last = data
        time.sleep(interval)


class MountTest(harness.TempDirTest):
    """A test case that mounts a fresh appendonlyfs (self.mount) and cleans it up whatever happens."""

    def setUp(self):
        super().setUp()
        if not AOFS or not os.path.exists(AOFS):
            self.fail("APPENDONLYFS is not set to the built appendonlyfs; run through ctest")
        self.log = None

    def mount(self, profile, options=(), extra_args=()):
        """Mounts appendonlyfs with -o profile=PROFILE,OPTIONS,log=...; returns (backing, mount)."""
        self.log = self.path(f"aofs-{profile}.log")
        self.mnt = None
        self.addCleanup(self.assert_unmounted)  # cleanups run last-in first-out: after the unmount
        self.backing, self.mnt = self.enterContext(
            aofs.mounted(AOFS, profile=profile, options=options, log=self.log, extra_args=extra_args))
        ACTIVE_MOUNTS.add(self.mnt)
        return self.backing, self.mnt

    def assert_unmounted(self):
        if self.mnt is None:
            return
        ACTIVE_MOUNTS.discard(self.mnt)
        with open("/proc/mounts") as f:
            points = [line.split()[1] for line in f]
        self.assertNotIn(self.mnt, points, "the mount was left behind")

    def m(self, name):
        return os.path.join(self.mnt, name)

    def b(self, name):
        return os.path.join(self.backing, name)

    def log_lines(self):
        if not self.log or not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [line.rstrip("\n") for line in f if line.strip()]

    def refused_writes(self):
        return [line for line in self.log_lines() if line.startswith("refused write ")]

    def run_lib(self, argv, **env):
        """argv under the library in enforce mode."""
        return harness.run(argv, mode="1", **env)

    def run_plain(self, argv, **env):
        """argv without the library."""
        return harness.run(argv, mode=None, preload=False, **env)

    def local_reference(self, argv_for_dir, name="local"):
        """Runs argv_for_dir(DIR) without the library on a local directory; returns {path: bytes}."""
        local = self.path(name)
        os.makedirs(local, exist_ok=True)
        proc = self.run_plain(argv_for_dir(local))
        self.assertOk(proc)
        return files_of(local)

    def assertTreesEqual(self, actual, expected):
        self.assertEqual(sorted(actual), sorted(expected), "different file names")
        for name in expected:
            self.assertEqual(len(actual[name]), len(expected[name]), f"{name}: different size")
            self.assertTrue(actual[name] == expected[name], f"{name}: different bytes")

    def assertNoMountRefusal(self):
        self.assertEqual(self.log_lines(), [], "the mount logged refusals or faults")

    def assertFails(self, proc, code=None):
        self.assertNotEqual(proc.returncode, 0, f"expected a failure\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        if code is not None:
            self.assertEqual(proc.returncode, code, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")


def _terminate(signum, frame):
    # Stopped from outside (unittest would catch SystemExit and go on, and skips cleanups on
    # KeyboardInterrupt): unmount what is mounted (the daemons then exit) and leave at once. A SIGKILL
    # (ctest's timeout) is handled by the e2e.no_mount_left_behind cleanup test instead.
    for mount_dir in list(ACTIVE_MOUNTS):
        for command in (["fusermount3", "-u", mount_dir], ["fusermount3", "-uz", mount_dir],
                        ["umount", "-l", mount_dir]):
            if not os.path.ismount(mount_dir):
                break
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    print(f"e2e: terminated by signal {signum}; unmounted {sorted(ACTIVE_MOUNTS)}", file=sys.stderr)
    os._exit(128 + signum)


def check_library_is_effective():
    """The tests "with the library" mean nothing if APPENDGUARD_LIB is not the working library: it must
    refuse the probe's backward write on a local file. Exits 1 (a failure, never a skip) otherwise."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="e2e-lib-check-") as directory:
        path = os.path.join(directory, "check.safetensors")
        proc = harness.run([harness.program("probe"), "backward", path])
        r = results(proc.stdout)
        if proc.returncode != 0 or r.get("write_back") != "-1 errno=EOPNOTSUPP" or not violations(proc.stderr):
            print(f"FAIL: APPENDGUARD_LIB={harness.LIB!r} does not refuse a backward write "
                  f"(exit {proc.returncode}, {r}); run through ctest", file=sys.stderr)
            sys.exit(1)


def install_signal_handlers():
    """On SIGTERM/SIGHUP: unmount ACTIVE_MOUNTS and exit."""
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)


def main():
    aofs.skip_or_fail_without_fuse("end-to-end tests")
    check_library_is_effective()
    install_signal_handlers()
    unittest.main(verbosity=2)
