"""A real client through the installed wheel (issue 11): PyTorch's dcp.save with HuggingFace consolidation
(tests/realclients/clients.py dcp_save), run by the `appendguard run --trace` console command of the
virtual environment packaging.wheel installed the wheel into, on a local directory. It must succeed, and
the trace must show consolidation's "r+b" reopen rewritten into an append.

The client interpreter is APPENDGUARD_CLIENT_PYTHON (one that imports torch); without it this exits 77
(skipped), or fails when APPENDGUARD_REQUIRE_REAL_CLIENTS=1 (CI).

usage: wheel_realclient.py SOURCE_DIR WORK_DIR"""
import os
import re
import shutil
import subprocess
import sys

SKIP = 77


def main():
    source, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    client = os.environ.get("APPENDGUARD_CLIENT_PYTHON", "")
    required = os.environ.get("APPENDGUARD_REQUIRE_REAL_CLIENTS") == "1"
    if not client or subprocess.run([client, "-c", "import torch, safetensors"], capture_output=True).returncode:
        print(f"real client: APPENDGUARD_CLIENT_PYTHON={client!r} cannot import torch and safetensors")
        return 1 if required else SKIP
    launcher = os.path.join(work, "installed", "bin", "appendguard")
    if not os.access(launcher, os.X_OK):
        print(f"FAIL: {launcher} is missing: packaging.wheel installs it")
        return 1
    out_dir = os.path.join(work, "realclient")
    shutil.rmtree(out_dir, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPENDGUARD") and k != "LD_PRELOAD"}
    proc = subprocess.run([launcher, "run", "--trace", "--", client,
                           os.path.join(source, "tests", "realclients", "clients.py"), "dcp_save", out_dir],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    print(proc.stdout)
    print(proc.stderr[-3000:])
    if proc.returncode != 0 or "ok:" not in proc.stdout:
        print(f"FAIL: dcp.save through the installed appendguard run exited {proc.returncode}")
        return 1
    rewritten = re.findall(r"open64 fd=\d+ (\S+\.safetensors) time=\S+ flags=O_RDWR\S* effective=O_WRONLY\|O_APPEND", proc.stderr)
    if not rewritten:
        print("FAIL: the trace shows no consolidation reopen rewritten into an append")
        return 1
    print(f"real client through the wheel: ok ({len(rewritten)} reopens rewritten into appends)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
