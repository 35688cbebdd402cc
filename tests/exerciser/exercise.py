#!/usr/bin/env python3
"""The differential exerciser: Hypothesis draws operation sequences (operations.py), the driver (driver.c)
carries each out on a local disk (the reference), on a store without the library and on the same store
with it (one run per configuration), and the judge (judge.py) gives each run with the library a verdict.
A failing sequence is shrunk by Hypothesis to the smallest that fails the same way (verdict, first
differing operation, configuration); --keep writes it into cases/ with its seed, and every run replays every
kept case on each of its stores.

    exercise.py --store rclone-minimal --examples 300          # one store, a fixed budget
    exercise.py --store all --minutes 5 --keep                  # a soak: rounds of new seeds until time is up
    exercise.py --store aofs-volumes --replay-only              # only the kept cases

Prints one summary line per store and configuration (counts per verdict), each distinct failure with its
shrunk sequence and the three runs' results, and with --json FILE writes the counts. Exit status: 0 when
no run failed the rule, 1 otherwise, 2 for bad arguments, 77 when a store cannot be mounted here (1 with
APPENDGUARD_REQUIRE_FUSE=1).

Environment (set by ctest): APPENDGUARD_LIB, APPENDGUARD_EXERCISER_DRIVER, APPENDONLYFS, TMPDIR,
APPENDGUARD_CLIENT_PYTHON (moto_server, for s3fs).
"""
import argparse
import collections
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
for extra in (os.path.join(TESTS, "e2e"), os.path.join(TESTS, "integration"), os.path.join(TESTS, "appendonlyfs")):
    if extra not in sys.path:
        sys.path.insert(0, extra)

import e2e_support  # noqa: E402
import judge  # noqa: E402
import matrix_ops  # noqa: E402
import matrix_stores  # noqa: E402
from e2e_support import harness  # noqa: E402
from hypothesis import HealthCheck, Phase, Verbosity, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402
from operations import INITIAL_FILES, sequences  # noqa: E402
from rclone_mount import RCLONE, rclone_mounted  # noqa: E402

CASES = os.path.join(HERE, "cases")
# Failures found and not fixed yet, each with why (docs/reliability.md lists them): a failure of the same
# store, configuration, verdict and first differing operation is counted and shown, and does not fail
# the run; every other failure does.
KNOWN = os.path.join(HERE, "known_failures.json")
DRIVER = os.environ.get("APPENDGUARD_EXERCISER_DRIVER", "")
CLIENT = os.environ.get("APPENDGUARD_CLIENT_PYTHON", "")
# rclone waits --vfs-write-wait (1 s) for a missing earlier write before an out-of-order write fails; the
# exerciser's writes never arrive out of order by accident, so it waits 10 ms.
RCLONE_QUICK = ("--vfs-write-wait", "10ms")
RCLONE_MODES = {
    "rclone-off": ("off", RCLONE_QUICK),
    "rclone-minimal": ("minimal", ("--vfs-write-back", "0s", *RCLONE_QUICK)),
    "rclone-writes": ("writes", ("--vfs-write-back", "0s", *RCLONE_QUICK)),
    "rclone-full": ("full", ("--vfs-write-back", "0s", *RCLONE_QUICK)),
}
STORES = ("local", "aofs-hdfs", "aofs-s3", "aofs-strict", "aofs-volumes", "chattr", *RCLONE_MODES, "s3fs")
# name -> the variables of a run with the library
CONFIGS = {
    "defaults": {"APPENDGUARD": "1"},
    "audit": {"APPENDGUARD": "audit"},
    "syscalls": {"APPENDGUARD": "1", "APPENDGUARD_SYSCALLS": "always"},
    "pattern": {"APPENDGUARD": "1", "APPENDGUARD_PATHS": "*"},
}


class StoreMissing(RuntimeError):
    pass


class Run:
    """One run of a sequence: status (0, the driver's exit status, -SIGNAL or "timeout"), the result lines,
    the `appendguard:` lines by the index of the operation they came with, the files left {name: bytes}."""

    def __init__(self, status, results, loud, files, seconds):
        self.status, self.results, self.loud, self.files, self.seconds = status, results, loud, files, seconds

    def loud_at(self, index):
        return bool(self.loud.get(index))


def appendguard_lines(stderr):
    out = collections.defaultdict(list)
    index = -1
    for line in stderr.splitlines():
        if line.startswith("@") and line[1:].isdigit():
            index = int(line[1:])
        elif "appendguard: " in line:
            out[index].append(line)
    return out


class Site:
    """A directory of one store where sequences run, each in a fresh subdirectory."""

    def __init__(self, directory, append_only=False):
        self.directory, self.append_only, self.count = directory, append_only, 0

    def run(self, ops, env, timeout):
        self.count += 1
        work = os.path.join(self.directory, f"s{self.count}")
        os.mkdir(work)
        for name, data in INITIAL_FILES.items():
            with open(os.path.join(work, name), "wb") as f:
                f.write(data)
            if self.append_only:
                matrix_ops.set_append_only(os.path.join(work, name))
        start = time.monotonic()
        proc = subprocess.Popen([DRIVER], cwd=work, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate("\n".join(ops) + "\n", timeout=timeout)
            status = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            status = "timeout"
        seconds = time.monotonic() - start
        files = {}
        for name in sorted(os.listdir(work)):
            path = os.path.join(work, name)
            try:
                with open(path, "rb") as f:
                    files[name] = f.read()
            except OSError as error:
                files[name] = f"<unreadable: {error.strerror}>".encode()
            if self.append_only:
                with contextlib.suppress(OSError):
                    matrix_ops.set_append_only(path, False)
        shutil.rmtree(work, ignore_errors=True)
        return Run(status, out.splitlines(), appendguard_lines(err), files, seconds)


@contextlib.contextmanager
def mounted(store, root, endpoint):
    """Yields the Site of `store` (mounted for the duration)."""
    if store == "local":
        yield Site(tempfile.mkdtemp(prefix="local-", dir=root))
    elif store in RCLONE_MODES:
        if RCLONE is None:
            raise StoreMissing("rclone is not installed")
        mode, extra = RCLONE_MODES[store]
        with rclone_mounted(root, mode, extra_args=extra, on_mount=e2e_support.ACTIVE_MOUNTS.add) as (_, mnt, _):
            try:
                yield Site(mnt)
            finally:
                e2e_support.ACTIVE_MOUNTS.discard(mnt)
    else:
        try:
            with matrix_stores.mounted_store(store, root, endpoint) as directory:
                yield Site(directory, append_only=store == "chattr")
        except matrix_stores.StoreMissing as missing:
            raise StoreMissing(str(missing)) from None


class Exerciser:
    """Runs sequences on one mounted store and judges them; keeps counts and the smallest failing sequence
    per distinct failure."""

    def __init__(self, store, site, local_site, configs):
        self.store, self.site, self.local_site, self.configs = store, site, local_site, configs
        self.local_cache = {}
        self.counts = collections.defaultdict(collections.Counter, {c: collections.Counter() for c in configs})
        self.failures = {}  # (config, verdict, operation) -> details of the smallest failing sequence
        self.sequences = 0
        self.started = time.monotonic()
        self.first_failure = None

    def local(self, ops):
        key = tuple(ops)
        if not key:
            return Run(0, [], {}, dict(INITIAL_FILES), 0.0)
        if key not in self.local_cache:
            self.local_cache[key] = self.local_site.run(ops, harness.child_env(mode=None, preload=False), 60)
        return self.local_cache[key]

    def check(self, ops, configs=None, seed=None, source="generated"):
        """Judges ops under each configuration; returns the failures [(key, details)]."""
        self.sequences += 1
        local = self.local(ops)
        timeout = max(10.0, 20 * local.seconds)
        plain = self.site.run(ops, harness.child_env(mode=None, preload=False), timeout)
        found = []
        for config in configs or self.configs:
            lib = self.site.run(ops, harness.child_env(mode=None, **CONFIGS[config]), timeout)
            verdict, operation = judge.judge(ops, local, plain, lib, lambda n: self.local(ops[:n]).files,
                                             refusing_named="APPENDGUARD_PATHS" in CONFIGS[config])
            self.counts[config][verdict] += 1
            if verdict in judge.FAILING:
                key = (config, verdict, operation)
                details = {"store": self.store, "config": config, "verdict": verdict, "operation": operation,
                           "seed": seed, "source": source, "ops": list(ops),
                           "local": local.results, "plain": plain.results, "lib": lib.results,
                           "lib_lines": {str(k): v for k, v in lib.loud.items()},
                           "seconds": round(time.monotonic() - self.started, 1)}
                old = self.failures.get(key)
                if old is None or (len(ops), ops) < (len(old["ops"]), old["ops"]):
                    self.failures[key] = details
                if self.first_failure is None and source == "generated":
                    self.first_failure = time.monotonic() - self.started
                found.append((key, details))
        return found

    def explore(self, examples, seed, max_size):
        """One Hypothesis search of `examples` sequences from `seed`, shrinking each distinct failure."""
        kinds = {}

        def failure_type(key):
            if key not in kinds:
                kinds[key] = type("Failure_" + "_".join(key).replace("-", "_"), (AssertionError,), {})
            return kinds[key]

        @settings(max_examples=examples, database=None, deadline=None, report_multiple_bugs=True,
                  suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
                  phases=(Phase.generate, Phase.shrink))
        @hypothesis_seed(seed)
        @given(sequences(max_size))
        def search(ops):
            # A known failure is counted without stopping the search (Hypothesis stops soon after a failure).
            found = [(k, d) for k, d in self.check(ops, seed=seed) if not known_why(self.store, k, KNOWN_FAILURES)]
            if found:
                key, details = found[0]
                raise failure_type(key)(json.dumps(details))

        try:
            search()
        except Exception:  # noqa: BLE001  (Hypothesis re-raises what it found; self.failures holds it)
            pass


def kept_cases():
    out = []
    if os.path.isdir(CASES):
        for name in sorted(os.listdir(CASES)):
            if name.endswith(".json"):
                with open(os.path.join(CASES, name)) as f:
                    case = json.load(f)
                case["file"] = name
                out.append(case)
    return out


def known_failures():
    with open(KNOWN) as f:
        return json.load(f)


KNOWN_FAILURES = known_failures()


def known_why(store, key, known):
    config, verdict, operation = key
    for entry in known:
        if (store in entry["stores"] or entry["stores"] == ["*"]) and entry["config"] in (config, "*") and \
                entry["verdict"] == verdict and entry["operation"] in (operation, "*"):
            return entry["why"]
    return None


def keep(details):
    """Writes a failure into cases/ (named by store, configuration, verdict and operation)."""
    os.makedirs(CASES, exist_ok=True)
    name = "-".join((details["store"], details["config"], details["verdict"], details["operation"])) + ".json"
    case = {k: details[k] for k in ("store", "config", "verdict", "operation", "seed", "ops")}
    case["found"] = {"local": details["local"], "plain": details["plain"], "lib": details["lib"]}
    with open(os.path.join(CASES, name), "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")
    return name


def describe(details):
    lines = [f"  {details['store']} [{details['config']}] {details['verdict']} at {details['operation']} "
             f"(seed {details['seed']}, {details['source']}, after {details['seconds']} s):"]
    for i, op in enumerate(details["ops"]):
        get = (lambda r: r[i] if i < len(r) else "-")
        mark = " " if get(details["lib"]) == get(details["local"]) else "*"
        lines.append(f"   {mark} {op:<40} local {get(details['local']):<22} without {get(details['plain']):<22} "
                     f"with {get(details['lib'])}")
        for line in details["lib_lines"].get(str(i), [])[:2]:
            lines.append(f"        {line[:150]}")
    return "\n".join(lines)


def parse_arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", action="append", default=[], help=f"one of {', '.join(STORES)} or all")
    parser.add_argument("--config", action="append", default=[], help=f"one of {', '.join(CONFIGS)} or all")
    parser.add_argument("--examples", type=int, default=300, help="sequences per Hypothesis search")
    parser.add_argument("--minutes", type=float, default=0, help="soak: searches with new seeds until then")
    parser.add_argument("--seed", type=int, default=None, help="the first search's seed (default: random)")
    parser.add_argument("--max-size", type=int, default=8, help="operations per sequence at most")
    parser.add_argument("--replay-only", action="store_true", help="only the kept cases")
    parser.add_argument("--keep", action="store_true", help="write each distinct failure into cases/")
    parser.add_argument("--json", help="write the counts here")
    parser.add_argument("--ops", help="judge only this sequence (operations separated by ';') and show it")
    args = parser.parse_args(argv)
    stores = list(STORES) if "all" in args.store or not args.store else args.store
    configs = list(CONFIGS) if "all" in args.config else (args.config or ["defaults"])
    for value, accepted, what in ((stores, STORES, "--store"), (configs, CONFIGS, "--config")):
        for v in value:
            if v not in accepted:
                print(f"exercise: {what} {v!r}: accepted are {', '.join(accepted)} or all", file=sys.stderr)
                sys.exit(2)
    if args.examples < 1 or args.max_size < 1 or args.minutes < 0:
        print("exercise: --examples and --max-size take a positive number, --minutes one >= 0", file=sys.stderr)
        sys.exit(2)
    args.store, args.config = stores, configs
    return args


def exercise_store(store, args, root, endpoint, local_site):
    """Replays the kept cases and searches on one store; returns its Exerciser."""
    with mounted(store, root, endpoint) as site:
        ex = Exerciser(store, site, local_site, args.config)
        for case in [] if args.ops else kept_cases():
            for key, details in ex.check(case["ops"], configs=[case.get("config", "defaults")],
                                         seed=case.get("seed"), source=f"kept case {case['file']}"):
                ex.failures[key] = details
        if args.ops:
            ops = [op.strip() for op in args.ops.split(";") if op.strip()]
            for config in args.config:
                ex.check(ops, configs=[config], source="--ops")
                print(f"{store} [{config}]: " + ", ".join(v for v, n in ex.counts[config].items() if n))
            return ex
        if args.replay_only:
            return ex
        seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
        deadline = time.monotonic() + args.minutes * 60
        while True:
            ex.explore(args.examples, seed, args.max_size)
            seed += 1
            if time.monotonic() >= deadline:
                return ex


def main(argv=None):
    args = parse_arguments(sys.argv[1:] if argv is None else argv)
    if not DRIVER or not os.path.exists(DRIVER):
        print("exercise: APPENDGUARD_EXERCISER_DRIVER is not the built driver; run through ctest or "
              "scripts/exercise", file=sys.stderr)
        return 2
    e2e_support.install_signal_handlers()
    required = os.environ.get("APPENDGUARD_REQUIRE_FUSE") == "1"
    root = tempfile.mkdtemp(prefix="exerciser-")
    summary = {}
    failed = False
    with contextlib.ExitStack() as stack:
        endpoint = None
        if "s3fs" in args.store:
            try:
                endpoint = stack.enter_context(matrix_stores.moto_server(CLIENT, root)) if CLIENT else None
            except matrix_stores.StoreMissing:
                endpoint = None
        local_site = Site(tempfile.mkdtemp(prefix="reference-", dir=root))
        for store in args.store:
            try:
                ex = exercise_store(store, args, root, endpoint, local_site)
            except (StoreMissing, RuntimeError) as missing:
                print(f"exercise: {store}: cannot mount it here: {missing}", file=sys.stderr)
                if required:
                    failed = True
                    continue
                return 77
            for config, counts in ex.counts.items():
                text = ", ".join(f"{v} {counts[v]}" for v in judge.VERDICTS if counts[v])
                print(f"{store} [{config}]: {sum(counts.values())} runs: {text}")
            summary[store] = {"sequences": ex.sequences, "counts": {c: dict(n) for c, n in ex.counts.items()},
                              "first_failure_seconds": ex.first_failure,
                              "failures": sorted("/".join(k) for k in ex.failures)}
            known = KNOWN_FAILURES
            summary[store]["known"] = []
            for key in sorted(ex.failures):
                details = ex.failures[key]
                why = known_why(store, key, known)
                if why:
                    summary[store]["known"].append("/".join(key))
                    print(f"  known, not fixed yet: {store} {'/'.join(key)}: {why}")
                    continue
                failed = True
                print(describe(details))
                if args.keep and details["source"] == "generated":
                    print(f"    kept as cases/{keep(details)}")
    shutil.rmtree(root, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1, sort_keys=True)
            f.write("\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
