"""Trace lines are buffered per thread and written in batches (report/trace_buffer.h): a line reaches the
log at a flush point (close, fsync of a guarded file), when its thread exits, before a violation report,
before exec and at exit; a forked child does not write its parent's buffered lines again."""
import json
import os
import re
import signal
import textwrap
import unittest

from harness import PYTHON, TempDirTest, run, violations

TRACE = re.compile(r"^appendguard: trace: pid=(\d+) tid=(\d+) (\w+) fd=(-?\d+) ", re.M)


class TraceBufferTest(TempDirTest):
    def traced(self, body, log_name="trace.log", **env):
        """Runs a Python script under the library with tracing to a log; returns (process, log text)."""
        log = self.path(log_name)
        prelude = textwrap.dedent(f"""\
            import os, sys, threading
            LOG = {log!r}
            PATH = {self.path("a.safetensors")!r}
            def lines(kind="write"):
                try:
                    with open(LOG) as f:
                        return sum(1 for l in f if f" {{kind}} fd=" in l and ": trace: " in l)
                except FileNotFoundError:
                    return 0
            """)
        proc = run([PYTHON, "-c", prelude + textwrap.dedent(body)], APPENDGUARD_TRACE="1",
                   APPENDGUARD_LOG=log, **env)
        text = ""
        if os.path.exists(log):
            with open(log) as f:
                text = f.read()
        return proc, text

    def test_lines_wait_for_a_flush_point(self):
        proc, log = self.traced("""
            fd = os.open(PATH, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            for _ in range(3):
                os.write(fd, b"abc")
            print("before fsync", lines())
            os.fsync(fd)
            print("after fsync", lines(), lines("fsync"))
            os.write(fd, b"d")
            print("before close", lines())
            os.close(fd)
            print("after close", lines(), lines("close"))
            """)
        self.assertOk(proc)
        self.assertEqual(proc.stdout.splitlines(),
                         ["before fsync 0", "after fsync 3 1", "before close 3", "after close 4 1"])
        self.assertEqual(len(TRACE.findall(log)), 7, log)  # the open, 4 writes, fsync, close

    def test_buffered_lines_are_written_at_exit_before_the_summary(self):
        proc, log = self.traced("""
            fd = os.open(PATH, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            for _ in range(5):
                os.write(fd, b"abc")
            print(lines())
            """)  # the descriptor stays open: no flush point before exit
        self.assertOk(proc)
        self.assertEqual(proc.stdout.strip(), "0")
        ops = [m[2] for m in TRACE.findall(log)]
        self.assertEqual(ops.count("write"), 5, log)
        self.assertTrue(log.rstrip("\n").splitlines()[-1].startswith("appendguard: summary:"), log)

    def test_a_thread_writes_its_lines_when_it_exits(self):
        proc, log = self.traced("""
            fd = os.open(PATH, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            tid = []
            def work():
                tid.append(threading.get_native_id())
                for _ in range(4):
                    os.write(fd, b"abc")
            t = threading.Thread(target=work)
            t.start()
            t.join()  # returns when the Python thread is done, a little before the system thread ends
            for _ in range(500):
                if lines() == 4:
                    break
                threading.Event().wait(0.01)
            print(tid[0], lines())
            sys.stdout.flush()
            os._exit(0)  # no exit flush: what is in the log came from the thread's exit
            """)
        self.assertOk(proc)
        tid, count = proc.stdout.split()
        self.assertEqual(count, "4")
        self.assertEqual([m[1] for m in TRACE.findall(log) if m[2] == "write"], [tid] * 4, log)

    def test_a_violation_report_comes_after_the_lines_before_it(self):
        for fmt in ("text", "json"):
            for on_violation in ("error", "abort"):
                with self.subTest(format=fmt, on_violation=on_violation):
                    proc, log = self.traced("""
                        fd = os.open(PATH, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                        for _ in range(3):
                            os.write(fd, b"abc")
                        try:
                            os.pwrite(fd, b"x", 0)
                        except OSError:
                            pass
                        os.write(fd, b"after")
                        os.close(fd)
                        """, f"{fmt}-{on_violation}.log", APPENDGUARD_FORMAT=fmt, APPENDGUARD_ON_VIOLATION=on_violation,
                                             APPENDGUARD_BACKTRACE="0")
                    if on_violation == "abort":
                        self.assertEqual(proc.returncode, -signal.SIGABRT, proc.stderr)
                    else:
                        self.assertOk(proc)
                    if fmt == "json":
                        records = [json.loads(line) for line in log.splitlines()]
                        kinds = [(r["type"], r.get("operation")) for r in records]
                    else:
                        kinds = [("violation", "pwrite64") if line in violations(log) else
                                 ("trace", line.split()[4]) for line in log.splitlines()
                                 if line.startswith(("appendguard: trace:", "appendguard: violation:"))]
                    at = kinds.index(("violation", "pwrite64"))
                    self.assertEqual(kinds[:at].count(("trace", "write")), 3, log)
                    if on_violation == "error":
                        self.assertIn(("trace", "pwrite64"), kinds[at:])  # the refused call's own line
                        self.assertEqual(kinds[at:].count(("trace", "write")), 1, log)

    def test_a_killed_process_loses_only_the_lines_since_its_last_flush_point(self):
        # No signal handler is installed (docs/reference.md, Trace): what a crash loses, and no more.
        for sig in ("SIGKILL", "SIGTERM"):  # (a sanitizer would catch a SIGSEGV itself)
            with self.subTest(signal=sig):
                proc, log = self.traced(f"""
                    import signal
                    fd = os.open(PATH, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                    for _ in range(3):
                        os.write(fd, b"abc")
                    os.fsync(fd)
                    os.write(fd, b"lost")
                    os.kill(os.getpid(), signal.{sig})
                    """, f"{sig}.log")
                self.assertEqual(proc.returncode, -getattr(signal, sig), proc.stderr)
                self.assertEqual([m[2] for m in TRACE.findall(log)], ["open64", "write", "write", "write", "fsync"],
                                 log)

    def test_a_forked_child_does_not_write_its_parents_lines(self):
        proc, log = self.traced("""
            fd = os.open(PATH, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            for _ in range(3):
                os.write(fd, b"abc")
            child = os.fork()
            if child == 0:
                os.write(fd, b"child")
                os.close(fd)  # a flush point in the child
                os._exit(0)
            os.waitpid(child, 0)
            print(os.getpid(), child)
            os.close(fd)
            """)
        self.assertOk(proc)
        parent, child = proc.stdout.split()
        writes = [m[0] for m in TRACE.findall(log) if m[2] == "write"]
        self.assertEqual(sorted(writes), sorted([parent] * 3 + [child]), log)
        self.assertEqual([m[0] for m in TRACE.findall(log) if m[2] == "close"], [child, parent], log)

    def test_lines_are_written_before_exec(self):
        proc, log = self.traced("""
            fd = os.open(PATH, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(fd, b"abc")
            os.write(fd, b"abc")
            os.execv("/bin/true", ["true"])
            """)
        self.assertOk(proc)
        self.assertEqual([m[2] for m in TRACE.findall(log)].count("write"), 2, log)

    def test_many_lines_from_many_threads_all_arrive_whole(self):
        proc, log = self.traced("""
            def work(n):
                fd = os.open(PATH + str(n) + ".safetensors", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                for _ in range(2000):
                    os.write(fd, b"abcdefgh")
            threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            """, APPENDGUARD_FORMAT="json")
        self.assertOk(proc)
        records = [json.loads(line) for line in log.splitlines()]  # every line whole
        writes = [r for r in records if r["type"] == "trace" and r["operation"] == "write"]
        self.assertEqual(len(writes), 8000)
        for tid in {r["tid"] for r in writes}:
            offsets = [int(r["detail"].split()[1].split("=")[1]) for r in writes if r["tid"] == tid]
            self.assertEqual(offsets, [8 * i for i in range(2000)])  # in order within a thread


if __name__ == "__main__":
    unittest.main()
