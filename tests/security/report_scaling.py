"""`appendguard report` reads linearly: the work it does on 100,000 reports is at most 15 times its work on
10,000 (linear: 10; quadratic: 100), counted in instructions by callgrind (deterministic), never timed.

Each generated report is a refused write on a file of its own, from a call site of its own, with its trace
lines (open, write, refusal) as APPENDGUARD_TRACE=1 writes them: the worst case for grouping and for the
page's timelines. Run with the launcher's path; prints the counts and the ratio for docs/security.md.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

LIMIT = 15.0


def write_log(path, count):
    with open(path, "w") as f:
        for i in range(count):
            name = f"/ckpt/run/shard-{i:06d}.safetensors"
            pid = 1000 + i % 64
            f.write(f"appendguard: trace: pid={pid} tid={pid} open fd=5 {name} time=1700000000.{i:06d} "
                    f"flags=O_WRONLY|O_CREAT|O_TRUNC effective=O_WRONLY|O_CREAT|O_TRUNC size=0 -> 5\n")
            f.write(f"appendguard: trace: pid={pid} tid={pid} write fd=5 {name} time=1700000000.{i:06d} "
                    f"bytes=64 offset=0 end_of_file=0 -> 64\n")
            f.write(f"appendguard: trace: pid={pid} tid={pid} pwrite64 fd=5 {name} time=1700000000.{i:06d} "
                    f"bytes=8 offset=0 end_of_file=64 (refused) -> -1 EOPNOTSUPP\n")
            f.write(f"appendguard: violation: pwrite64 {name} fd=5 bytes=8 offset=0 end_of_file=64: refused "
                    f"(EOPNOTSUPP); needs a code change; pid {pid} rank {i % 64} host node{i % 8}\n"
                    f"  why: the write is below the end of file\n"
                    f"  python stack (most recent call first):\n"
                    f"    File \"/job/save_{i}.py\", line {i % 900 + 1}, in save_shard_{i}\n"
                    f"    File \"/job/train.py\", line 12, in main\n")


def instructions(launcher, args, workdir):
    out = os.path.join(workdir, "callgrind.out")
    result = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", launcher, "report",
                             *args], capture_output=True, text=True, timeout=3000)
    if result.returncode not in (0, 1):
        raise SystemExit(f"report failed ({result.returncode}): {result.stderr[-2000:]}")
    match = re.search(r"Collected : (\d+)", result.stderr)
    if not match:
        raise SystemExit(f"no instruction count from callgrind: {result.stderr[-2000:]}")
    return int(match.group(1))


def main():
    launcher = sys.argv[1]
    if not shutil.which("valgrind"):
        print("FAIL: valgrind is not installed (scripts/lib/common.sh installs it)")
        return 1
    workdir = tempfile.mkdtemp(prefix="ag-report-scaling-")
    failed = False
    try:
        counts = {}
        for n in (10_000, 100_000):
            log = os.path.join(workdir, f"{n}.log")
            write_log(log, n)
            page = os.path.join(workdir, f"{n}.html")
            counts[n] = (instructions(launcher, [log], workdir), instructions(launcher, ["--html", page, log], workdir),
                         os.path.getsize(page))
        for i, what in enumerate(("report", "report --html")):
            ratio = counts[100_000][i] / counts[10_000][i]
            print(f"{what}: {counts[10_000][i]:,} instructions for 10,000 reports, {counts[100_000][i]:,} for "
                  f"100,000: {ratio:.1f}x (limit {LIMIT:.0f}x)")
            failed = failed or ratio > LIMIT
        print(f"page: {counts[10_000][2]:,} bytes for 10,000 files, {counts[100_000][2]:,} for 100,000")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
