"""Shared helpers of the real-client tests: the client interpreter, running tests/realclients/clients.py
with or without the library, and local reference runs computed once per test class.

Environment (set by ctest, see CMakeLists.txt): everything e2e_support needs, plus
APPENDGUARD_CLIENT_PYTHON (an interpreter that imports torch, safetensors and transformers) and, in CI,
APPENDGUARD_REQUIRE_REAL_CLIENTS=1 (a missing client fails instead of skipping).
"""
import os
import shutil
import subprocess
import sys
import tempfile

from e2e_support import MountTest, files_of
from e2e_support import main as e2e_main

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENTS = os.path.join(HERE, "clients.py")
CLIENT_PYTHON = os.environ.get("APPENDGUARD_CLIENT_PYTHON", "")
SKIP_RETURN_CODE = 77
ENABLE_HINT = ("scripts/test prepares them in build/venv from a local torch==2.13.0 wheel, or set "
               "APPENDGUARD_VENV to a virtual environment with torch, safetensors and transformers")


def client_problem():
    """Why CLIENT_PYTHON cannot run the clients, or None."""
    if not CLIENT_PYTHON:
        return "APPENDGUARD_CLIENT_PYTHON is not set"
    if not os.access(CLIENT_PYTHON, os.X_OK):
        return f"APPENDGUARD_CLIENT_PYTHON={CLIENT_PYTHON} is not an executable"
    probe = subprocess.run([CLIENT_PYTHON, "-c", "import torch, safetensors, transformers; print(torch.__version__, "
                            "safetensors.__version__, transformers.__version__)"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{CLIENT_PYTHON} cannot import torch, safetensors and transformers ({last})"
    print(f"real clients: {CLIENT_PYTHON}: torch, safetensors, transformers = {probe.stdout.strip()}")
    return None


def skip_or_fail_without_clients():
    problem = client_problem()
    if problem is None:
        return
    if os.environ.get("APPENDGUARD_REQUIRE_REAL_CLIENTS") == "1":
        print(f"FAIL: {problem}, and APPENDGUARD_REQUIRE_REAL_CLIENTS=1", file=sys.stderr)
        sys.exit(1)
    print(f"SKIP: real-client tests: {problem}; {ENABLE_HINT}")
    sys.exit(SKIP_RETURN_CODE)


def client(action, *dirs):
    """argv running one action of clients.py with the client interpreter."""
    return [CLIENT_PYTHON, CLIENTS, action, *dirs]


class ClientTest(MountTest):
    """A mount test whose local reference runs (without the library) are made once per class."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.reference_root = tempfile.mkdtemp(prefix="realclients-reference-")
        cls.references = {}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.reference_root, True)
        super().tearDownClass()

    def reference(self, action, *inputs):
        """{relative path: bytes} that `action` writes on a local directory without the library."""
        return files_of(self.reference_dir(action, *inputs))

    def reference_dir(self, action, *inputs):
        """The local directory where `action` ran without the library (run on first use)."""
        key = (action, *inputs)
        if key not in self.references:
            out = os.path.join(self.reference_root, f"{action}-{len(self.references)}")
            proc = self.run_plain(client(action, out, *inputs))
            self.assertOk(proc)
            self.references[key] = out
        return self.references[key]

    def local_shards(self):
        """A local directory holding the DCP shards of the test state dict (written without the library)."""
        return self.reference_dir("make_shards")


def main():
    skip_or_fail_without_clients()
    e2e_main()
