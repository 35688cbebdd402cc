"""scripts/demo, after set-up and build: see the comment in scripts/demo. Exits 0 only if every step
happened as described.

usage: demo.py BUILD_DIR [CLIENT_PYTHON]
With CLIENT_PYTHON (an interpreter that imports torch), steps 1 and 2 run PyTorch's own dcp.save with
HuggingFace consolidation; without it, a faithful imitation of its write pattern, and the demo says so."""
import filecmp
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "appendonlyfs"))
import aofs  # noqa: E402

BUILD = sys.argv[1]
APPENDONLYFS = os.path.join(BUILD, "src", "appendonlyfs", "appendonlyfs")
LAUNCHER = os.path.join(BUILD, "src", "cli", "appendguard")
SCRIPTS = os.path.join(REPO, "tests", "integration", "scripts")
CLIENT_PYTHON = sys.argv[2] if len(sys.argv) > 2 else ""
if CLIENT_PYTHON:
    CONSOLIDATION = "PyTorch's dcp.save with HuggingFaceStorageWriter(enable_consolidation=True)"
    CONSOLIDATE = [CLIENT_PYTHON, os.path.join(REPO, "tests", "realclients", "clients.py"), "dcp_save"]
else:
    CONSOLIDATION = "an imitation of PyTorch's DCP consolidation (no PyTorch here)"
    CONSOLIDATE = [sys.executable, os.path.join(SCRIPTS, "dcp_consolidate.py")]
RANDOM_WRITER = [sys.executable, os.path.join(SCRIPTS, "random_writer.py")]


def step(text):
    print(f"--> {text}", flush=True)


def fail(text):
    print(f"demo FAILED: {text}", flush=True)
    sys.exit(1)


def run(argv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPENDGUARD") and k != "LD_PRELOAD"}
    return subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)


def output_files(directory):
    """The consolidated files (DCP's intermediate shards, in subdirectories, differ from run to run)."""
    return sorted(n for n in os.listdir(directory) if os.path.isfile(os.path.join(directory, n)))


def same_files(a, b):
    names = output_files(a)
    return names == output_files(b) and all(filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False)
                                            for n in names)


def main():
    if not aofs.fuse_available():
        fail("FUSE is absent (/dev/fuse or fusermount3 missing): the demo needs a FUSE mount")
    log = tempfile.NamedTemporaryFile(prefix="appendonlyfs-", suffix=".log", delete=False).name
    with aofs.mounted(APPENDONLYFS, profile="hdfs", log=log) as (backing, mount):
        step(f"appendonlyfs (HDFS rules) mounted at {mount}")

        step(f"consolidation: {CONSOLIDATION}")
        step("1. DCP consolidation without appendguard: header 'wb', reopen 'r+b', seek end, append tensors")
        plain = run(CONSOLIDATE + [os.path.join(mount, "plain")])
        if plain.returncode == 0 or "[Errno 95] Operation not supported" not in plain.stderr:
            fail(f"expected the Errno 95 failure, got exit {plain.returncode}:\n{plain.stderr}")
        print("    fails as on the cluster: " + plain.stderr.strip().splitlines()[-1])

        step("2. the same under `appendguard run --`")
        guarded_dir = os.path.join(mount, "guarded")
        guarded = run([LAUNCHER, "run", "--"] + CONSOLIDATE + [guarded_dir])
        if guarded.returncode != 0:
            fail(f"the consolidation failed under appendguard:\n{guarded.stderr}")
        with tempfile.TemporaryDirectory() as local:
            reference = run(CONSOLIDATE + [os.path.join(local, "out")])
            if reference.returncode != 0:
                fail(f"the local reference run failed:\n{reference.stderr}")
            if not same_files(os.path.join(backing, "guarded"), os.path.join(local, "out")):
                fail("the files on the mount differ from a local run")
        count = len(output_files(os.path.join(backing, "guarded")))
        print(f"    succeeds: {count} files, byte-identical to a run on a local disk")

        step("3. a writer that seeks to random offsets (PyTorch 2.8 style) under appendguard")
        random = run([LAUNCHER, "run", "--backtrace", "4", "--"] + RANDOM_WRITER + [os.path.join(mount, "r.safetensors")])
        report = [line for line in random.stderr.splitlines() if line.startswith("appendguard: violation:")]
        if random.returncode == 0 or not report:
            fail(f"expected a refusal with a report, got exit {random.returncode}:\n{random.stderr}")
        print("    refused before it reached the mount:")
        block = random.stderr.split("appendguard: violation:", 1)[1].split("  native stack:", 1)[0]
        for line in ("appendguard: violation:" + block).rstrip().splitlines():
            print("      " + line)
        with open(log) as f:
            refused_by_mount = [line for line in f if line.startswith("refused write") and "/r.safetensors" in line]
        if refused_by_mount:
            fail(f"the mount saw a misplaced write: {refused_by_mount[0]}")
    os.unlink(log)
    step("unmounted")

    step("4. audit mode: the same writer on a local disk, to predict cluster failures before a job runs")
    with tempfile.TemporaryDirectory() as local:
        target = os.path.join(local, "r.safetensors")
        audit = run([LAUNCHER, "run", "--audit", "--backtrace", "0", "--"] + RANDOM_WRITER + [target])
        predicted = [line for line in audit.stderr.splitlines() if line.startswith("appendguard: violation:")]
        if audit.returncode != 0 or len(predicted) != 4:
            fail(f"expected the writer to succeed with 4 predictions, got exit {audit.returncode}:\n{audit.stderr}")
        print(f"    the writer ran unchanged; {len(predicted)} operations would fail on the mount:")
        for line in predicted:
            print("      " + line.split(": allowed (audit mode)")[0])
    step("all steps behaved as described")
    return 0


if __name__ == "__main__":
    sys.exit(main())
