"""Modes and configuration: inert, audit, abort, warn, trace, log files, and every invalid variable."""
import os
import signal
import socket
import unittest

from harness import PYTHON, TempDirTest, program, read_bytes, results, run, violations


class ModesTest(TempDirTest):
    def backward(self, path, mode="1", **env):
        return run([program("probe"), "backward", path], mode=mode, **env)

    def test_inert_when_unset_or_off(self):
        for mode in (None, "", "0", "off"):
            with self.subTest(mode=mode):
                path = self.path(f"inert{mode}.safetensors")
                proc = self.backward(path, mode=mode)
                self.assertOk(proc)
                self.assertEqual(results(proc.stdout)["write_back"], "5")
                self.assertEqual(proc.stderr, "")

    def test_enforce_spellings(self):
        for mode in ("1", "on", "enforce"):
            with self.subTest(mode=mode):
                proc = self.backward(self.path(f"e{mode}.safetensors"), mode=mode)
                self.assertEqual(results(proc.stdout)["write_back"], "-1 errno=EOPNOTSUPP")

    def test_audit_changes_nothing_and_reports(self):
        path, plain = self.path("a.safetensors"), self.path("plain.safetensors")
        proc = self.backward(path, mode="audit")
        self.assertOk(proc)
        ref = self.backward(plain, mode=None, preload=False)
        self.assertEqual(results(proc.stdout), results(ref.stdout))
        self.assertEqual(read_bytes(path), read_bytes(plain))
        lines = violations(proc.stderr)
        self.assertEqual(len(lines), 2, proc.stderr)
        self.assertIn("open ", lines[0])  # the O_RDWR open of an existing file
        self.assertIn("audit mode", lines[0])
        self.assertIn("write ", lines[1])
        self.assertIn("bytes=5 offset=10 end_of_file=100", lines[1])

    def test_audit_reports_reads_of_read_write_handles(self):
        proc = run([program("probe"), "read", self.path("r.safetensors")], mode="audit")
        self.assertOk(proc)
        r = results(proc.stdout)
        self.assertEqual(r["read"], "10")
        self.assertEqual(r["mmap_shared_write"], "0")
        kinds = [line.split()[2] for line in violations(proc.stderr)]
        self.assertEqual(kinds, ["open", "read", "mmap"])

    def test_abort_mode_dies_with_sigabrt_after_the_report(self):
        path = self.path("ab.safetensors")
        proc = self.backward(path, APPENDGUARD_ON_VIOLATION="abort")
        self.assertEqual(proc.returncode, -signal.SIGABRT)
        self.assertIn("aborting the process", violations(proc.stderr)[0])
        self.assertEqual(read_bytes(path), b"a" * 100)

    def test_warn_mode_lets_the_write_through_and_says_where_it_lands(self):
        path = self.path("w.safetensors")
        proc = self.backward(path, APPENDGUARD_ON_VIOLATION="warn")
        self.assertEqual(results(proc.stdout)["write_back"], "5")
        self.assertIn("let through", violations(proc.stderr)[0])
        self.assertIn("the bytes land at offset 100", violations(proc.stderr)[0])
        self.assertEqual(read_bytes(path), b"a" * 100 + b"b" * 5 + b"c" * 5)

    def test_trace_shows_every_operation_on_matched_files(self):
        path = self.path("t.safetensors")
        proc = self.backward(path, APPENDGUARD_TRACE="1")
        traced = [line.split()[4] for line in proc.stderr.splitlines() if line.startswith("appendguard: trace:")]
        self.assertEqual(traced, ["open", "write", "close", "open", "lseek", "write", "lseek", "write", "close"])

    def test_trace_shows_close_fsync_and_their_real_results(self):
        code = ("import os, sys\n"
                "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
                "os.write(fd, b'x')\n"
                "os.fsync(fd)\n"
                "os.fdatasync(fd)\n"
                "os.close(fd)\n")
        proc = run([PYTHON, "-c", code, self.path("f.safetensors")], APPENDGUARD_TRACE="1")
        self.assertOk(proc)
        lines = [l for l in proc.stderr.splitlines() if l.startswith("appendguard: trace:")]
        for op in ("fsync", "fdatasync", "close"):
            self.assertTrue(any(f" {op} fd=" in l and self.path("f.safetensors") in l and l.endswith("-> 0")
                                for l in lines), (op, lines))

    def test_log_file_with_pid_host_and_rank(self):
        template = os.path.join(self.dir, "ag-%h-%r-%p.log")
        proc = self.backward(self.path("l.safetensors"), APPENDGUARD_LOG=template, RANK="3")
        self.assertOk(proc)
        logs = [n for n in os.listdir(self.dir) if n.endswith(".log")]
        # Only the line that points at the log (test_log_sink checks its words).
        self.assertEqual(proc.stderr.splitlines(), [f"appendguard: refused write on {self.path('l.safetensors')} "
                                                    f"(EOPNOTSUPP): report in {os.path.join(self.dir, logs[0])} "
                                                    "(this process's later refusals: only there)"])
        self.assertEqual(len(logs), 1)
        self.assertTrue(logs[0].startswith(f"ag-{socket.gethostname()}-3-"), logs[0])
        with open(os.path.join(self.dir, logs[0])) as f:
            text = f.read()
        self.assertEqual(len(violations(text)), 1)
        self.assertIn("rank 3", text)

    def test_log_does_not_follow_a_symlink(self):
        target = self.path("elsewhere.txt")
        link = self.path("ag.log")
        os.symlink(target, link)
        proc = self.backward(self.path("y.safetensors"), APPENDGUARD_LOG=link)
        self.assertFalse(os.path.exists(target))
        self.assertEqual(len(violations(proc.stderr)), 1)  # falls back to stderr rather than lose it

    def test_unopenable_log_says_so_once_and_reports_to_stderr(self):
        log = self.path("no/such/dir/ag.log")
        proc = run([program("probe"), "pwrite", self.path("u.safetensors")], APPENDGUARD_LOG=log)
        self.assertOk(proc)
        notices = [l for l in proc.stderr.splitlines() if l.startswith("appendguard: cannot open APPENDGUARD_LOG")]
        self.assertEqual(len(notices), 1, proc.stderr)
        self.assertIn(f"'{log}' (ENOENT): reports go to stderr", notices[0])
        self.assertEqual(len(violations(proc.stderr)), 3)

    def test_backtrace_frames(self):
        proc = self.backward(self.path("b0.safetensors"), APPENDGUARD_BACKTRACE="0")
        self.assertNotIn("native stack", proc.stderr)
        proc = self.backward(self.path("b2.safetensors"), APPENDGUARD_BACKTRACE="2")
        # The frame lines under "  native stack:", up to the next section (where the position left the end,
        # where the file was opened); a "(not shown: ...)" line is not a frame.
        after = proc.stderr.split("  native stack:\n", 1)[1].splitlines()
        section = after[:next(i for i, l in enumerate(after) if not l.startswith("    "))]
        stack = [line for line in section if line.startswith("    #")]
        self.assertEqual(len(stack), 2, section)

    def test_each_invalid_variable_exits_2_with_one_line(self):
        cases = [
            ({"APPENDGUARD": "yess"}, "APPENDGUARD='yess'"),
            ({"APPENDGUARD_ON_VIOLATION": "refuse"}, "APPENDGUARD_ON_VIOLATION='refuse'"),
            ({"APPENDGUARD_ERRNO": "ENOPE"}, "APPENDGUARD_ERRNO='ENOPE'"),
            ({"APPENDGUARD_PATHS": "[abc"}, "APPENDGUARD_PATHS='[abc'"),
            ({"APPENDGUARD_PATHS": "a::b"}, "APPENDGUARD_PATHS='a::b'"),
            ({"APPENDGUARD_PATHS": "ckpt/*.bin"}, "APPENDGUARD_PATHS='ckpt/*.bin'"),
            ({"APPENDGUARD_PATHS": ""}, "APPENDGUARD_PATHS=''"),
            ({"APPENDGUARD_BACKTRACE": "-1"}, "APPENDGUARD_BACKTRACE='-1'"),
            ({"APPENDGUARD_BACKTRACE": "many"}, "APPENDGUARD_BACKTRACE='many'"),
            ({"APPENDGUARD_LOG": ""}, "APPENDGUARD_LOG=''"),
            ({"APPENDGUARD_TRACE": "2"}, "APPENDGUARD_TRACE='2'"),
            ({"APPENDGUARD_REOPEN": "copy"}, "APPENDGUARD_REOPEN='copy'"),
            ({"APPENDGUARD_PYTHON_STACK": "sometimes"}, "APPENDGUARD_PYTHON_STACK='sometimes'"),
        ]
        for env, named in cases:
            with self.subTest(env=env):
                proc = run([program("probe"), "dcp", self.path("x.safetensors")], mode="1", **env)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertEqual(proc.stdout, "")  # exits before main
                lines = proc.stderr.splitlines()
                self.assertEqual(len(lines), 1, proc.stderr)
                self.assertTrue(lines[0].startswith("appendguard: invalid " + named), lines[0])
                self.assertIn("accepted", lines[0])

    def test_audit_with_error_action_is_rejected(self):
        proc = run([PYTHON, "-c", "pass"], mode="audit", APPENDGUARD_ON_VIOLATION="error")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("APPENDGUARD_ON_VIOLATION='error'", proc.stderr)

    def test_errno_accepts_names_and_numbers(self):
        proc = self.backward(self.path("n.safetensors"), APPENDGUARD_ERRNO="5")
        self.assertEqual(results(proc.stdout)["write_back"], "-1 errno=EIO")


if __name__ == "__main__":
    unittest.main()
