#!/usr/bin/env python3
"""Checkpoint-scale saves with and without the library (issue 27; docs/benchmarks.md, "Checkpoint scale"):
each workload runs as a child process of the shared venv's Python, without the library and with
LD_PRELOAD=<lib> APPENDGUARD=1 APPENDGUARD_PATHS='*.safetensors:DIR/**' (every file the save writes is
guarded, as on a store guarded whole), in interleaved rounds: one child of each kind per round, back to
back, the order alternating between rounds. Each child writes into a fresh directory (removed after it)
and times its save alone (torch's import excluded). Per workload: the median save time of each side, the
median of the per-round ratios (with / without), its ~95 % interval (binomial order statistics) and the
range of the ratios, with the load average before and after.

usage: scripts/bench checkpoint [BUILD_DIR] [WORKLOAD ...] [--rounds N] [--size BYTES] [--dir DIR]
  (or: tests/bench/checkpoint/checkpoint_bench.py with the same arguments)

  BUILD_DIR     build tree with src/shim/libappendguard.so (default: build in the repository root)
  WORKLOAD      dcp, save_file (default: both)
    dcp         torch.distributed.checkpoint.save of SIZE bytes (8 float32 tensors) through
                HuggingFaceStorageWriter with consolidation into 2 files (the shards, then PyTorch's
                consolidation: "wb" header, close, "r+b", one write per tensor)
    save_file   safetensors.torch.save_file of one float32 tensor of SIZE bytes
  --rounds N    rounds (default 5)
  --size BYTES  bytes saved (default 1 GiB: 1073741824)
  --dir DIR     where the saves go (default: a directory on /dev/shm; a store mount works too, e.g. an
                appendonlyfs mount: without the library a save may then fail, which stops the bench)

Needs the shared venv (APPENDGUARD_VENV, default build/venv) with torch and safetensors.
Timings are printed, never judged: the exit status is 0 unless a child failed.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
sys.path.insert(0, str(HERE.parent))
from bench_common import load_average, median_interval, python  # noqa: E402
WORKLOADS = ("dcp", "save_file")
LIBRARY = Path("src/shim/libappendguard.so")


def environment(library, out):
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("APPENDGUARD")}
    env.update(PYTHONWARNINGS="ignore", OMP_NUM_THREADS="2")
    if library:
        env.update(LD_PRELOAD=str(library), APPENDGUARD="1", APPENDGUARD_PATHS=f"*.safetensors:{out}/**")
    return env


def run_once(workload, library, base, size):
    out = tempfile.mkdtemp(prefix=f"appendguard-ckpt-{workload}-", dir=base)
    try:
        command = [python(), str(HERE / "checkpoint_save.py"), workload, out, str(size)]
        start = time.perf_counter()
        proc = subprocess.run(command, env=environment(library, out), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - start
    finally:
        shutil.rmtree(out, ignore_errors=True)
    side = "with" if library else "without"
    if proc.returncode != 0:
        raise RuntimeError(f"{workload} {side} the library: exit status {proc.returncode}\n{proc.stdout}{proc.stderr}")
    values = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    if "save_s" not in values:
        raise RuntimeError(f"{workload} {side} the library: no save_s in its output:\n{proc.stdout}")
    return float(values["save_s"]), wall


def main():
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(prog="scripts/bench checkpoint", add_help=False)
    parser.add_argument("words", nargs="*")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=1 << 30)
    parser.add_argument("--dir")
    parser.add_argument("-h", "--help", action="store_true")
    args = parser.parse_args()
    if args.help:
        print(__doc__.strip())
        return 0
    workloads = [w for w in args.words if w in WORKLOADS]
    others = [w for w in args.words if w not in WORKLOADS]
    if len(others) > 1:
        sys.exit(f"bench checkpoint: unknown workloads or two build directories: {' '.join(others)} "
                 f"(workloads: {', '.join(WORKLOADS)})")
    build_dir = Path(others[0]).resolve() if others else REPO / "build"
    library = build_dir / LIBRARY
    if not library.exists():
        sys.exit(f"bench checkpoint: {library} is missing (build it: cmake --build {build_dir} --target appendguard)")
    if args.rounds < 1 or args.size < 4096:
        sys.exit("bench checkpoint: --rounds must be at least 1 and --size at least 4096")
    workloads = workloads or list(WORKLOADS)
    base = args.dir or ("/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    load_before = load_average()
    print(f"bench checkpoint: {python()}, library {library}, {args.size} bytes into {base or tempfile.gettempdir()}, "
          f"{args.rounds} rounds, load average {load_before}", file=sys.stderr)
    samples = {w: {"without": [], "with": [], "wall_without": [], "wall_with": []} for w in workloads}
    try:
        for r in range(args.rounds):
            for workload in workloads:
                order = (None, library) if r % 2 == 0 else (library, None)
                for lib in order:
                    save, wall = run_once(workload, lib, base, args.size)
                    side = "with" if lib else "without"
                    samples[workload][side].append(save)
                    samples[workload]["wall_" + side].append(wall)
            print(f"  round {r + 1}/{args.rounds} done (load average {load_average()})", file=sys.stderr)
    except RuntimeError as failure:
        print(f"bench checkpoint: a child failed: {failure}", file=sys.stderr)
        return 1

    print(f"{'workload':<10} {'without s':>10} {'with s':>8} {'ratio':>7} {'95% CI':>13} {'range':>13} "
          f"{'child wall ratio':>16}")
    for workload in workloads:
        s = samples[workload]
        ratios = [w / wo for w, wo in zip(s["with"], s["without"])]
        wall_ratios = [w / wo for w, wo in zip(s["wall_with"], s["wall_without"])]
        low, high = median_interval(ratios)
        print(f"{workload:<10} {statistics.median(s['without']):>10.3f} {statistics.median(s['with']):>8.3f} "
              f"{statistics.median(ratios):>7.3f} {low:>6.3f}-{high:<6.3f} {min(ratios):>6.3f}-{max(ratios):<6.3f} "
              f"{statistics.median(wall_ratios):>16.3f}")
    print(f"save time inside the child (median of {args.rounds} interleaved rounds; ratio: median of the "
          f"per-round with / without); {args.size} bytes; load average {load_before} before, {load_average()} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
