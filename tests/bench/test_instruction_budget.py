"""The instructions the library adds per call stay within their budgets (issue 12; docs/benchmarks.md).

Counts, not times: `scripts/bench --instructions` runs bench_hooks under callgrind with and without the
library and counts the instructions executed inside the measured loop, which is deterministic for a
given build. A FUSE mount that the library does not guard whole makes every untracked write and close
look at its result (a store's refusal is said, issue 10), which is a different, dearer path: the count is
taken in a private mount namespace without the FUSE mounts that other tests may have made meanwhile.
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


def fuse_mounts():
    with open("/proc/self/mounts") as mounts:
        return [line.split()[1] for line in mounts if line.split()[2].startswith("fuse")]


def bench_command():
    return [sys.executable, str(REPO / "scripts" / "bench"), str(BUILD), "--instructions", "--no-build",
            *BUDGETS]


def run_bench():
    if not fuse_mounts():
        return subprocess.run(bench_command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        raise unittest.SkipTest(f"FUSE mounts are present ({', '.join(fuse_mounts())}) and no private mount "
                                "namespace can be made here (needs root and unshare): counts would include "
                                "the watched path")
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", NAMESPACE_SCRIPT, "sh",
               *bench_command()]
    return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


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

    def test_the_library_was_really_measured(self):
        # A library that failed to load would add nothing anywhere: the tracked write must cost something.
        self.assertGreater(self.added["tracked_write_64"], 0, self.table)


if __name__ == "__main__":
    unittest.main()
