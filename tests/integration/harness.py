"""Shared helpers for the integration and end-to-end tests.

Environment (set by ctest): APPENDGUARD_LIB (the preload library), APPENDGUARD_TEST_BIN (built test
programs), APPENDGUARD_TEST_PYTHON (the interpreter to run Python children with).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

LIB = os.environ.get("APPENDGUARD_LIB", "")
# Sanitizer builds (build/asan, build/tsan): the sanitizer runtime, which must come before the
# instrumented library in LD_PRELOAD when it is preloaded into an uninstrumented program.
SANITIZER_RUNTIME = os.environ.get("APPENDGUARD_TEST_SANITIZER_RUNTIME", "")
if SANITIZER_RUNTIME and not os.path.exists(SANITIZER_RUNTIME):
    raise RuntimeError(f"APPENDGUARD_TEST_SANITIZER_RUNTIME={SANITIZER_RUNTIME} does not exist")
PRELOAD = f"{SANITIZER_RUNTIME}:{LIB}" if SANITIZER_RUNTIME else LIB
BIN = os.environ.get("APPENDGUARD_TEST_BIN", "")
PYTHON = os.environ.get("APPENDGUARD_TEST_PYTHON", sys.executable)
HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "scripts")


def program(name):
    """Path of a test program built by CMake."""
    return os.path.join(BIN, name)


def script(name):
    """Path of a Python scenario script in tests/integration/scripts."""
    return os.path.join(SCRIPTS, name)


def child_env(mode="1", preload=True, **variables):
    """The environment for a child: ours without APPENDGUARD_*, plus LD_PRELOAD and the given variables.
    mode=None leaves APPENDGUARD unset."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPENDGUARD") and k != "LD_PRELOAD"}
    if preload:
        env["LD_PRELOAD"] = PRELOAD
    if mode is not None:
        env["APPENDGUARD"] = mode
    env.update({k: str(v) for k, v in variables.items()})
    return env


def run(argv, mode="1", preload=True, timeout=120, cwd=None, **variables):
    """Runs argv under the library and returns the CompletedProcess (text output captured)."""
    return subprocess.run(argv, env=child_env(mode, preload, **variables), cwd=cwd, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def results(stdout):
    """Parses the probe's key=value lines into {key: "value [errno=NAME]"}."""
    out = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


def violations(stderr):
    """The first lines of the violation reports in a process's stderr (or log)."""
    return [line for line in stderr.splitlines() if line.startswith("appendguard: violation:")]


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class TempDirTest(unittest.TestCase):
    """A test case with a fresh temporary directory in self.dir."""

    def setUp(self):
        if not LIB or not os.path.exists(LIB):
            self.fail("APPENDGUARD_LIB is not set to the built library; run through ctest")
        self.dir = tempfile.mkdtemp(prefix="appendguard-test-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def assertOk(self, proc):
        self.assertEqual(proc.returncode, 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
