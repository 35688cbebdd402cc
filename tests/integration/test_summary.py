"""The summary line at exit: one per process that touched guarded files, into the log (on stderr only when
APPENDGUARD_SUMMARY=1), none with APPENDGUARD_SUMMARY=0 or from a process that touched none; audit mode
counts the findings that need a code change apart from those enforce mode fixes."""
import os
import re
import unittest

from harness import PYTHON, TempDirTest, program, run


def summaries(text):
    return [dict(re.findall(r"(\w+)=(\S+)", line)) for line in text.splitlines()
            if line.startswith("appendguard: summary: ")]


class SummaryTest(TempDirTest):
    def backward(self, mode="1", **env):
        return run([program("probe"), "backward", self.path("x.safetensors")], mode=mode, **env)

    def log_text(self, log):
        with open(log) as f:
            return f.read()

    def test_one_line_in_the_log_with_the_counts(self):
        log = self.path("ag.log")
        proc = self.backward(APPENDGUARD_LOG=log, RANK="3")
        self.assertOk(proc)
        self.assertNotIn("summary", proc.stderr)
        [s] = summaries(self.log_text(log))
        self.assertEqual(s["pid"], next(iter(re.findall(r"pid (\d+)", self.log_text(log)))))
        self.assertEqual(s["rank"], "3")
        self.assertEqual(s["host"], os.uname().nodename)
        self.assertGreaterEqual(int(s["guarded_opens"]), 1)
        self.assertEqual(s["rewritten_opens"], "1")  # the O_RDWR reopen
        self.assertEqual(s["violations"], "1")  # the write below the end
        self.assertEqual(s["refused_bytes"], "5")
        self.assertGreaterEqual(int(s["writes"]), 1)
        self.assertEqual(s["held_sessions"], "0")

    def test_off_and_on_stderr(self):
        log = self.path("off.log")
        self.backward(APPENDGUARD_LOG=log, APPENDGUARD_SUMMARY="0")
        self.assertEqual(summaries(self.log_text(log)), [])
        proc = self.backward()
        self.assertEqual(summaries(proc.stderr), [])  # stderr: only when asked
        proc = self.backward(APPENDGUARD_SUMMARY="1")
        self.assertEqual(len(summaries(proc.stderr)), 1, proc.stderr)

    def test_nothing_from_a_process_that_touched_no_guarded_file(self):
        log = self.path("none.log")
        proc = run([PYTHON, "-c", f"open({self.path('a.txt')!r}, 'w').write('x')"], APPENDGUARD_LOG=log,
                   APPENDGUARD_SUMMARY="1")
        self.assertOk(proc)
        self.assertEqual(proc.stderr, "")
        self.assertFalse(os.path.exists(log) and summaries(self.log_text(log)))

    def test_audit_separates_what_enforce_fixes(self):
        log = self.path("audit.log")
        proc = self.backward(mode="audit", APPENDGUARD_LOG=log)
        self.assertOk(proc)
        text = self.log_text(log)
        self.assertIn("; fixed by enforce mode; pid ", text)  # the read-write open
        self.assertIn("; needs a code change; pid ", text)  # the write below the end
        [s] = summaries(text)
        self.assertEqual(s["violations"], "1")
        self.assertEqual(s["fixed_by_enforce"], "1")

    def test_writes_and_bytes_of_closed_and_open_files_from_threads_and_a_fork_child(self):
        # Writes are counted per file under its lock and added up at exit: files closed before exit, one
        # left open, four writing threads; a fork child counts only its own writes.
        script = """
import os, sys, threading
d = sys.argv[1]
def writer(i):
    with open(os.path.join(d, f"t{i}.safetensors"), "wb", buffering=0) as f:
        for _ in range(100):
            f.write(b"x" * 10)
threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
left_open = open(os.path.join(d, "open.safetensors"), "wb", buffering=0)
left_open.write(b"y" * 7)
pid = os.fork()
if pid == 0:
    with open(os.path.join(d, "child.safetensors"), "wb", buffering=0) as f:
        f.write(b"z" * 3)
    sys.exit(0)
os.waitpid(pid, 0)
print(os.getpid())
"""
        proc = run([PYTHON, "-c", script, self.dir], APPENDGUARD_SUMMARY="1")
        self.assertOk(proc)
        parent = proc.stdout.strip()
        by_pid = {s["pid"]: s for s in summaries(proc.stderr)}
        self.assertEqual(len(by_pid), 2, proc.stderr)
        [child] = [pid for pid in by_pid if pid != parent]
        self.assertEqual((by_pid[parent]["writes"], by_pid[parent]["bytes"]), ("401", "4007"), proc.stderr)
        self.assertEqual((by_pid[child]["writes"], by_pid[child]["bytes"]), ("1", "3"), proc.stderr)


if __name__ == "__main__":
    unittest.main()
