"""The raw-system-call layer with real rustix (tests/bench/raw_syscalls/rustix_writer: rustix 0.35's Linux
backend, whose calls are its own `syscall` instructions, built offline by cargo from Debian's
librust-rustix-dev as scripts/bench raw builds it): a Rust program's raw openat, writes and pwrite take the
decisions of their libc twins where the layer traps them, and are unseen where it does not (`off`, and
`auto` before any guarded file is open: docs/limits.md). 4 MiB in 1 MiB writes, a few seconds in all.
Skips where cargo or librust-rustix-dev is missing, unless APPENDGUARD_REQUIRE_REAL_CLIENTS=1."""
import os
import re
import sys
import tempfile
import unittest

from harness import TempDirTest, read_bytes, run, violations

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench", "raw_syscalls"))
import raw_bench  # noqa: E402  (its builder: the same program as the benchmark's)

TOTAL, CHUNK = 4 << 20, 1 << 20


def summary(stderr):
    """The summary line's counters, or None when the process touched no guarded file."""
    line = re.search(r"^appendguard: summary: (.*)$", stderr, re.M)
    return dict(re.findall(r"(\w+)=(\S+)", line.group(1))) if line else None


class RustixTest(TempDirTest):
    def setUp(self):
        super().setUp()
        release = os.uname().release.split("-")[0].split(".")
        if (int(release[0]), int(release[1])) < (5, 11):
            self.skipTest("Syscall User Dispatch needs Linux 5.11+")

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory(prefix="appendguard-rustix-")
        try:
            cls.writer = raw_bench.build_rust_writer(cls.work.name)
        except raw_bench.Failed as missing:
            cls.work.cleanup()
            if os.environ.get("APPENDGUARD_REQUIRE_REAL_CLIENTS") == "1":
                raise AssertionError(f"APPENDGUARD_REQUIRE_REAL_CLIENTS=1 but {missing}")
            raise unittest.SkipTest(str(missing))

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()

    def write(self, mode, setting, name="model.safetensors"):
        proc = run([self.writer, mode, self.path(name), str(TOTAL), str(CHUNK)], APPENDGUARD_SYSCALLS=setting,
                   APPENDGUARD_SUMMARY="1", APPENDGUARD_BACKTRACE="0")
        self.assertOk(proc)
        self.assertIn(f"written={TOTAL}", proc.stdout)
        return proc

    def test_always_tracks_rustix_raw_open_and_writes_and_refuses_its_pwrite_at_0(self):
        proc = self.write("raw-pwrite0", "always")
        self.assertIn("pwrite_at_0=95", proc.stdout)  # EOPNOTSUPP, as libc's pwrite64 gets
        counters = summary(proc.stderr)
        self.assertEqual((counters["guarded_opens"], counters["writes"], counters["bytes"], counters["violations"]),
                         ("1", "4", str(TOTAL), "1"), proc.stderr)
        self.assertEqual(len([v for v in violations(proc.stderr) if " pwrite64 " in v]), 1, proc.stderr)
        self.assertEqual(read_bytes(self.path("model.safetensors"))[:2], bytes([0, 1]))

    def test_auto_traps_rustix_writes_once_a_guarded_file_is_open(self):
        counters = summary(self.write("std-open", "auto").stderr)  # opened through libc, written by rustix
        self.assertEqual((counters["guarded_opens"], counters["writes"], counters["bytes"]), ("1", "4", str(TOTAL)))

    def test_auto_does_not_see_a_first_guarded_open_made_raw_nor_off_the_writes(self):
        proc = self.write("raw-pwrite0", "auto")  # the documented limit of auto (docs/limits.md)
        self.assertIn("pwrite_at_0=ok", proc.stdout)
        self.assertIsNone(summary(proc.stderr), proc.stderr)
        counters = summary(self.write("std-open", "off").stderr)
        self.assertEqual((counters["guarded_opens"], counters["writes"]), ("1", "0"))


if __name__ == "__main__":
    unittest.main()
