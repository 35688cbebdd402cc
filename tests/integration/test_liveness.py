"""Every hook is live: each name of src/shim/interposed.def, called on a guarded file by each probe build
(plain, _FILE_OFFSET_BITS=64, fortified with real __open_2 calls), leaves a trace or report line that
names it. A hook or an export deleted from the library leaves its name out and fails here."""
import re
import unittest

from harness import TempDirTest, program, run
from interposed import TABLE

PROBES = ("liveness_probe", "liveness_probe64", "liveness_probe_fortified")
# A trace line names the operation after the process; a report's first line right after "violation:".
NAMED = re.compile(r"^appendguard: (?:trace: pid=\d+ tid=\d+|violation:) (\w+) ", re.M)


def names_in(stderr):
    return set(NAMED.findall(stderr))


# The raw-system-call layer's hooks on threads and signals (pthread_create, sigaction, signal,
# sigprocmask, pthread_sigmask) take no file, and libc's syscall() leaves the line of the call it makes
# (pwrite64...): test_raw_syscalls.py shows them live.
NO_FILE_KINDS = ("thread", "signal", "raw")


class LivenessTest(TempDirTest):
    def test_every_interposed_name_leaves_a_line_in_every_probe_build(self):
        table = {row.name for row in TABLE if row.kind not in NO_FILE_KINDS}
        for name in PROBES:
            with self.subTest(probe=name):
                proc = run([program(name), self.dir], APPENDGUARD_TRACE="1", APPENDGUARD_BACKTRACE="0")
                self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
                self.assertEqual(table - names_in(proc.stderr), set(), "names no line mentions")

    def test_the_fortified_build_calls_open_2_itself(self):
        # Not through dlsym: its open() with flags known only at run time compiles to __open_2.
        proc = run([program("liveness_probe_fortified"), self.dir], APPENDGUARD_TRACE="1",
                   APPENDGUARD_BACKTRACE="0")
        self.assertIn("__open_2", names_in(proc.stderr))
        self.assertIn("__openat_2", names_in(proc.stderr))
        with open(program("liveness_probe_fortified"), "rb") as binary:
            self.assertIn(b"__open_2", binary.read())


if __name__ == "__main__":
    unittest.main()
