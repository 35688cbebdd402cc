"""The instructions the library adds per call stay within their budgets (issue 12; docs/benchmarks.md).

Counts, not times: `scripts/bench --instructions` runs bench_hooks under callgrind with and without the
library and counts the instructions executed inside the measured loop, which is deterministic for a
given build. A FUSE mount that the library does not guard whole makes every untracked write and close
look at its result (a store's refusal is said, issue 10), which is a different, dearer path: the count is
taken in a private mount namespace without the FUSE mounts that other tests may have made meanwhile.
Issue 27: a guarded file's whole life (open + 64 B write + close), and a write open of an unmatched name
with one appendonlyfs mount present (every training node has its store mounted), counted in a namespace
where that mount is made by hand.
"""
import os
import re
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ["APPENDGUARD_BUILD_DIR"])

# Added instructions per operation, at most (issue 12; lseek as write; fwrite of an untracked stream runs
# no code of ours).
BUDGETS = {
    "write_devnull": 12,
    "lseek_cur": 12,
    "open_close_read": 40,
    "tracked_write_64": 120,
    "tracked_write_1m": 120,
    "fwrite_untracked": 0,
    # Issue 27's target, met: 12,805 -> 4,463 -> 2,605 -> 1,897 -> 1,465 (sites read back from the stack,
    # the close's second registry lock gone, the path decided once, then tested and copied in one pass, one
    # mount lookup per open; then the chain read from the hook's frame, the registry's helpers inline, the
    # suffix compared once, the record written in place; docs/benchmarks.md).
    "guarded_cycle": 1500,
    # The same with 10,000 other guarded files open: flat (+144,500 when the live files were scanned;
    # +1,560 to +1,640 now). It moves by up to +-100 from run to run (the file index's probing over 10,000
    # inode numbers, which depend on what else tmpfs made).
    "guarded_cycle_10k": 1750,
    # An unmatched write open (+ close) with no store mounted: +376 and +279 before the path was decided
    # without being made (issue 27), +249 and +235 after, +181 and +167 made without a decision, +186 and
    # +174 (the mount table is read at its first use: the open asks whether it was), +155 and +143 now
    # (the name's suffix compared once, the write open's dispatch without frames of its own).
    "open_close_write": 160,
    "open_close_write_relative": 150,
}

# With one appendonlyfs mount present. Issue 27's target is 300, met by both; these ceilings keep it
# (+2,000 and more before, +825 and +944 with the path made and looked up, +361 and +466 with a normal
# path compared as given with the append-only mount points; docs/benchmarks.md says where the rest goes).
FUSE_BUDGETS = {
    "open_close_write": 260,  # +361 -> +285 -> +279 -> +249: made without a decision (issue 27's target: 300)
    # +466 -> +383 -> +283 -> +254: the working directory's answer cached per thread by its statx identity
    "open_close_write_relative": 265,
}

# Inside the namespace: every FUSE mount lazily unmounted (for this namespace only), then the bench.
NAMESPACE_SCRIPT = r"""
set -e
awk '$3 ~ /^fuse/ {print $2}' /proc/self/mounts | while read -r mount; do
  umount -l "$(printf '%b' "$mount")"
done
if awk '$3 ~ /^fuse/' /proc/self/mounts | grep -q .; then echo "a FUSE mount is left" >&2; exit 3; fi
exec "$@"
"""

# The same, then one appendonlyfs mount (hdfs profile: an append-only store, guarded whole) made for the
# bench and taken down after it.
FUSE_NAMESPACE_SCRIPT = r"""
awk '$3 ~ /^fuse/ {print $2}' /proc/self/mounts | while read -r mount; do
  umount -l "$(printf '%b' "$mount")"
done
if awk '$3 ~ /^fuse/' /proc/self/mounts | grep -q .; then echo "a FUSE mount is left" >&2; exit 3; fi
root=$(mktemp -d)
mkdir "$root/backing" "$root/mnt"
"$APPENDONLYFS" -f -o profile=hdfs "$root/backing" "$root/mnt" 2>"$root/aofs.log" &
daemon=$!
tries=0
until awk -v m="$root/mnt" '$2 == m' /proc/self/mounts | grep -q .; do
  tries=$((tries + 1))
  if [ "$tries" -gt 1000 ] || ! kill -0 "$daemon" 2>/dev/null; then
    echo "appendonlyfs did not mount: $(cat "$root/aofs.log")" >&2; kill "$daemon" 2>/dev/null; exit 3
  fi
  sleep 0.01
done
status=0
"$@" || status=$?
umount -l "$root/mnt"
wait "$daemon" || true
rm -rf "$root"
exit "$status"
"""


def fuse_mounts():
    with open("/proc/self/mounts") as mounts:
        return [line.split()[1] for line in mounts if line.split()[2].startswith("fuse")]


def bench_command(cases):
    return [sys.executable, str(REPO / "scripts" / "bench"), str(BUILD), "--instructions", "--no-build",
            *cases]


def run_bench():
    if not fuse_mounts():
        return subprocess.run(bench_command(BUDGETS), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        raise unittest.SkipTest(f"FUSE mounts are present ({', '.join(fuse_mounts())}) and no private mount "
                                "namespace can be made here (needs root and unshare): counts would include "
                                "the watched path")
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", NAMESPACE_SCRIPT, "sh",
               *bench_command(BUDGETS)]
    return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def appendonlyfs_binary():
    path = BUILD / "src" / "appendonlyfs" / "appendonlyfs"
    return path if path.exists() else None


def run_bench_with_a_fuse_mount():
    env = dict(os.environ, APPENDONLYFS=str(appendonlyfs_binary()))
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", FUSE_NAMESPACE_SCRIPT, "sh",
               *bench_command(FUSE_BUDGETS)]
    return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def added_per_call(table):
    added = {}
    for line in table.splitlines():
        match = re.match(r"^(\w+)\s+[\d.]+\s+[\d.]+\s+([+-][\d.]+)\s", line)
        if match:
            added[match.group(1)] = float(match.group(2))
    return added


class InstructionBudgetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if shutil.which("valgrind") is None:
            raise unittest.SkipTest("valgrind is not installed (scripts/test installs it)")
        proc = run_bench()
        if proc.returncode != 0:
            raise AssertionError(f"scripts/bench failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        cls.table = proc.stdout
        cls.added = added_per_call(proc.stdout)

    def test_every_budgeted_case_was_counted(self):
        self.assertEqual(sorted(self.added), sorted(BUDGETS), self.table)

    def test_each_case_stays_within_its_budget(self):
        for case, budget in BUDGETS.items():
            with self.subTest(case=case):
                self.assertLessEqual(self.added[case], budget,
                                     f"{case} adds {self.added[case]:+.0f} instructions per call, budget "
                                     f"{budget}:\n{self.table}")

    def test_an_unmatched_write_open_with_a_fuse_mount_present_stays_within_its_budget(self):
        # Needs a private mount namespace (root, unshare), /dev/fuse and the appendonlyfs of this build; CI
        # has all three (APPENDGUARD_REQUIRE_FUSE=1 makes their absence a failure).
        missing = [what for what, ok in (("root", os.geteuid() == 0), ("unshare", shutil.which("unshare")),
                                         ("/dev/fuse", os.path.exists("/dev/fuse")),
                                         ("appendonlyfs", appendonlyfs_binary())) if not ok]
        if missing:
            if os.environ.get("APPENDGUARD_REQUIRE_FUSE") == "1":
                self.fail(f"APPENDGUARD_REQUIRE_FUSE=1 but {', '.join(missing)} missing")
            self.skipTest(f"{', '.join(missing)} missing: no FUSE mount can be made for the count")
        proc = run_bench_with_a_fuse_mount()
        self.assertEqual(proc.returncode, 0, f"{proc.stdout}\n{proc.stderr}")
        added = added_per_call(proc.stdout)
        self.assertEqual(sorted(added), sorted(FUSE_BUDGETS), proc.stdout)
        for case, budget in FUSE_BUDGETS.items():
            with self.subTest(case=case):
                self.assertLessEqual(added[case], budget,
                                     f"{case} adds {added[case]:+.0f} instructions per call with an appendonlyfs "
                                     f"mount present, budget {budget}:\n{proc.stdout}")

    def test_the_library_was_really_measured(self):
        # A library that failed to load would add nothing anywhere: the tracked write must cost something.
        self.assertGreater(self.added["tracked_write_64"], 0, self.table)


if __name__ == "__main__":
    unittest.main()


class BenchChildrenTest(unittest.TestCase):
    """scripts/bench's children: the library's settings reach the runs with it, never those without."""

    def test_the_callers_settings_reach_only_the_runs_with_the_library(self):
        import importlib.machinery
        import importlib.util
        loader = importlib.machinery.SourceFileLoader("bench_script", str(REPO / "scripts" / "bench"))
        spec = importlib.util.spec_from_loader("bench_script", loader)
        bench = importlib.util.module_from_spec(spec)
        loader.exec_module(bench)
        saved = dict(os.environ)
        try:
            os.environ.update(APPENDGUARD="0", APPENDGUARD_SYSCALLS="off", LD_PRELOAD="/elsewhere.so")
            with_library = bench.child_env("/lib/libappendguard.so")
            without = bench.child_env(None)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        # APPENDGUARD_SYSCALLS=off scripts/bench ... measured `auto` when every APPENDGUARD* was dropped.
        self.assertEqual(with_library.get("APPENDGUARD_SYSCALLS"), "off")
        self.assertEqual(with_library["APPENDGUARD"], "1")
        self.assertEqual(with_library["LD_PRELOAD"], "/lib/libappendguard.so")
        self.assertFalse([k for k in without if k.startswith("APPENDGUARD") or k == "LD_PRELOAD"], without)
