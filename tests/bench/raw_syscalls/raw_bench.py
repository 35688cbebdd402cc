#!/usr/bin/env python3
"""What the raw-system-call layer costs real programs (docs/benchmarks.md, "Raw system calls"): each
workload runs as a child process without the library ("none") and with LD_PRELOAD=<lib> APPENDGUARD=1
and APPENDGUARD_SYSCALLS=off, auto and always, the settings interleaved in rounds (their order rotated
every round). Per configuration it prints the median and the range over the rounds of the child's wall
time, its CPU time (user+sys of all its threads, from getrusage(RUSAGE_CHILDREN) around it) and the figures the workload prints itself.

usage: tests/bench/raw_syscalls/raw_bench.py [BUILD_DIR] [WORKLOAD ...] [--rounds N] [--dir DIR]
                                             [--count] [--size BYTES] [--steps N] [--iterations N]
  (or: scripts/bench raw [BUILD_DIR] [WORKLOAD ...] [options])

  BUILD_DIR     build tree with src/shim/libappendguard.so (default: build in the repository root)
  WORKLOAD      rust, safetensors, torch, torch-small, tcmalloc (default: all that can run here)
    rust        tests/bench/raw_syscalls/rustix_writer (Rust on rustix 0.35's Linux backend, built offline
                with cargo against Debian's librust-rustix-dev) writes SIZE bytes in 1 MiB writes, to a
                guarded file (model.safetensors) and to an unguarded one (data.bin); `raw`: its openat,
                write and close are rustix's own instructions; `std-open`: the file is opened and closed
                through the standard library (libc), the writes are rustix's
    safetensors safetensors 0.8's save_file of one SIZE-byte tensor into a guarded directory (as a
                store guarded whole: its .tmpXXXXXX file matches no default pattern) and to an unguarded
                file; the temporary file is published with rustix's raw renameat
    torch       dcp_step_save.py: CPU PyTorch training steps (none open, then with a guarded file open)
                and dcp.save into a guarded directory
    torch-small small_steps.py: short training steps (STEPS x 30 per phase, OMP_WAIT_POLICY=PASSIVE),
                none open, then with a guarded file open: the most trapped futex per unit of work; the
                file held by the training thread, then by a background thread (asynchronous checkpoint)
    tcmalloc    alloc_loop.py with gperftools' libtcmalloc.so.4 preloaded (in every configuration,
                "none" included), with no guarded file open and then with one open
  --rounds N    rounds (default 5); --dir DIR where the files go (default a directory on /dev/shm)
  --count       instead of timing, run each configuration once under
                `strace -f -qq -e trace=none -e signal=SIGSYS` and count the SIGSYS delivered (trapped
                calls), by system call
  --size        bytes written by rust and safetensors (default 1 GiB); --steps training steps per phase
                (default 10); --iterations allocation-loop iterations per phase (default 2000)

Timings are printed, never judged; the exit status is 0 unless a child failed or a workload cannot run.
"""
import argparse
import collections
import os
import re
import resource
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
from bench_common import load_average, python  # noqa: E402
SETTINGS = ("none", "off", "auto", "always")
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4"
CARGO_REGISTRY = "/usr/share/cargo/registry"  # Debian's librust-*-dev sources


class Failed(Exception):
    pass


def build_rust_writer(work):
    """cargo build --release --offline with crates-io replaced by Debian's registry directory."""
    cargo = shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")
    if not os.path.exists(cargo):
        raise Failed("rust: cargo is not installed")
    if not list(Path(CARGO_REGISTRY).glob("rustix-*")):
        raise Failed("rust: Debian's librust-rustix-dev is not installed (apt-get install librust-rustix-dev)")
    home = Path(work) / "cargo-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        f'[source.crates-io]\nreplace-with = "debian"\n[source.debian]\ndirectory = "{CARGO_REGISTRY}"\n'
        "[net]\noffline = true\n")
    target = Path(work) / "cargo-target"
    env = dict(os.environ, CARGO_HOME=str(home), CARGO_TARGET_DIR=str(target))
    source = HERE / "rustix_writer"
    # The lock file is written next to the sources: build from a copy so the tree stays clean.
    copy = Path(work) / "rustix_writer"
    shutil.copytree(source, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns("Cargo.lock", "target"))
    result = subprocess.run([cargo, "build", "--release", "--offline", "--quiet"], cwd=copy, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        raise Failed(f"rust: cargo build failed:\n{result.stdout[-3000:]}")
    return str(target / "release" / "rustix_writer")


def environment(setting, library, extra_preload=None, **variables):
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("APPENDGUARD")}
    preload = []
    if setting != "none":
        preload.append(str(library))
        env.update(APPENDGUARD="1", APPENDGUARD_SYSCALLS=setting, APPENDGUARD_BACKTRACE="0", **variables)
    if extra_preload:
        preload.append(extra_preload)
    if preload:
        env["LD_PRELOAD"] = ":".join(preload)
    return env


def run_timed(command, env, what):
    start = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = child.communicate()
    wall = time.perf_counter() - start
    # The child is reaped by communicate(): measure() reads its CPU time from RUSAGE_CHILDREN.
    if child.returncode != 0:
        raise Failed(f"{what}: exit status {child.returncode}\n{out}{err[-3000:]}")
    figures = {k: float(v) for k, v in re.findall(r"(\w+(?:_m?s|_ratio))=([0-9.]+)", out.strip().splitlines()[-1])}
    return wall, figures


def cpu_of_children():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # microseconds, unlike os.times()' ticks
    return usage.ru_utime + usage.ru_stime


def measure(command, env, what):
    before = cpu_of_children()
    wall, figures = run_timed(command, env, what)
    figures["wall_s"] = wall
    figures["cpu_s"] = cpu_of_children() - before
    return figures


class Workload:
    """One configuration per (variant, setting): a command and its environment."""

    def __init__(self, name, variants, command, env, prepare=None):
        self.name, self.variants, self.command, self.env, self.prepare = name, variants, command, env, prepare


def workloads(args, library, work, wanted):
    files = Path(args.dir)
    result = []
    if "rust" in wanted:
        writer = build_rust_writer(work)
        variants = [(f"{mode} {target}", mode, target) for target in ("model.safetensors", "data.bin")
                    for mode in ("raw", "std-open")]
        result.append(Workload(
            "rust", [v[0] for v in variants],
            lambda v, vs=dict((v[0], v) for v in variants): [writer, vs[v][1], str(files / vs[v][2]),
                                                             str(args.size), str(1 << 20)],
            lambda v, s: environment(s, library)))
    if "safetensors" in wanted:
        # Guarded as on a store guarded whole: the directory, so that the temporary file is (its name,
        # .tmpXXXXXX, matches no default pattern); model.bin elsewhere is not.
        (files / "guarded").mkdir(exist_ok=True)
        targets = {"guarded": "guarded/model.safetensors", "unguarded": "model.bin"}
        result.append(Workload(
            "safetensors", list(targets),
            lambda v: [python(), str(HERE / "safetensors_save.py"), str(files / targets[v]), str(args.size)],
            lambda v, s: environment(s, library, APPENDGUARD_PATHS=f"{files}/guarded/**")))
    if "torch" in wanted:
        out = files / "torch"
        result.append(Workload(
            "torch", ["steps, dcp.save"],
            lambda v: [python(), str(HERE / "dcp_step_save.py"), str(out), str(args.steps)],
            lambda v, s: environment(s, library, APPENDGUARD_PATHS=f"*.safetensors:{out}/**"),
            prepare=lambda: (shutil.rmtree(out, ignore_errors=True), out.mkdir())))
    if "torch-small" in wanted:
        small = files / "torch-small"
        small.mkdir(exist_ok=True)
        holders = {"main thread holds the file": "main", "background thread holds the file": "background"}
        result.append(Workload(
            "torch-small", list(holders),
            lambda v: [python(), str(HERE / "small_steps.py"), str(small), str(args.steps * 30), holders[v]],
            lambda v, s: dict(environment(s, library), OMP_WAIT_POLICY="PASSIVE")))
    if "tcmalloc" in wanted:
        if not os.path.exists(TCMALLOC):
            raise Failed(f"tcmalloc: {TCMALLOC} is missing (apt-get install libgoogle-perftools4)")
        result.append(Workload(
            "tcmalloc", ["alloc loop"],
            lambda v: [python(), str(HERE / "alloc_loop.py"), str(files), str(args.iterations)],
            lambda v, s: environment(s, library, extra_preload=TCMALLOC)))
    return result


def summary(values):
    values = sorted(values)
    return f"{statistics.median(values):.4g} [{values[0]:.4g}-{values[-1]:.4g}]"


def time_workloads(selected, rounds):
    loads = []
    for workload in selected:
        samples = collections.defaultdict(list)
        for r in range(rounds):
            loads.append(float(load_average()) if load_average() != "?" else 0.0)
            for variant in workload.variants:
                order = list(SETTINGS[r % len(SETTINGS):] + SETTINGS[:r % len(SETTINGS)])
                for setting in order:
                    if workload.prepare:
                        workload.prepare()
                    figures = measure(workload.command(variant), workload.env(variant, setting),
                                      f"{workload.name} {variant} {setting}")
                    samples[(variant, setting)].append(figures)
            print(f"  {workload.name}: round {r + 1}/{rounds} done (load {load_average()})", file=sys.stderr)
        print(f"\n{workload.name}: median [min-max] over {rounds} rounds, seconds")
        for variant in workload.variants:
            keys = list(samples[(variant, "none")][0])
            keys = ["wall_s", "cpu_s"] + [k for k in keys if k not in ("wall_s", "cpu_s")]
            print(f"  {variant}")
            print("    " + f"{'setting':<8}" + "".join(f"{k:>30}" for k in keys))
            for setting in SETTINGS:
                runs = samples[(variant, setting)]
                print("    " + f"{setting:<8}" + "".join(f"{summary([f[k] for f in runs]):>30}" for k in keys))
    print(f"\nload average at each round's start: {min(loads):.2f}-{max(loads):.2f} "
          f"({os.cpu_count()} CPUs)")


def count_traps(selected, work):
    strace = shutil.which("strace")
    if not strace:
        raise Failed("--count needs strace")
    for workload in selected:
        print(f"\n{workload.name}: SIGSYS delivered (trapped raw calls), by system call")
        for variant in workload.variants:
            for setting in ("off", "auto", "always"):
                if workload.prepare:
                    workload.prepare()
                log = Path(work) / "strace.txt"
                command = [strace, "-f", "-qq", "-e", "trace=none", "-e", "signal=SIGSYS", "-o", str(log)]
                run_timed(command + workload.command(variant), workload.env(variant, setting),
                          f"{workload.name} {variant} {setting} under strace")
                calls = collections.Counter(re.findall(r"si_syscall=(?:__NR_)?(\w+)", log.read_text()))
                top = ", ".join(f"{n} {c}" for c, n in calls.most_common(6))
                print(f"  {variant:<34} {setting:<7} {sum(calls.values()):>7}  {top}")


def main():
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("words", nargs="*")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir")
    parser.add_argument("--count", action="store_true")
    parser.add_argument("--size", type=int, default=1 << 30)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("-h", "--help", action="store_true")
    args = parser.parse_args()
    if args.help:
        print(__doc__.strip())
        return 0
    known = ("rust", "safetensors", "torch", "torch-small", "tcmalloc")
    build_dir, wanted = REPO / "build", []
    for word in args.words:
        if word in known:
            wanted.append(word)
        elif Path(word).is_dir():
            build_dir = Path(word).resolve()
        else:
            sys.exit(f"raw_bench: {word!r} is neither a workload ({', '.join(known)}) nor a build directory")
    library = build_dir / "src" / "shim" / "libappendguard.so"
    if not library.exists():
        sys.exit(f"raw_bench: {library} is missing: build the appendguard target first")
    if args.rounds < 1 or args.size < 1 or args.steps < 1 or args.iterations < 1:
        sys.exit("raw_bench: --rounds, --size, --steps and --iterations must be positive")
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="appendguard-rawbench-", dir=base) as work:
        if not args.dir:
            args.dir = os.path.join(work, "files")
            os.mkdir(args.dir)
        try:
            selected = workloads(args, library, work, wanted or list(known))
            print(f"raw_bench: library {library}; files in {args.dir}; kernel {os.uname().release}; "
                  f"load {load_average()}", file=sys.stderr)
            if args.count:
                count_traps(selected, work)
            else:
                time_workloads(selected, args.rounds)
        except Failed as failure:
            print(f"raw_bench: {failure}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
