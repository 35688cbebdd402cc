"""APPENDGUARD_LOG never blocks nor kills the host, and a report it cannot take is not lost silently."""
import os
import subprocess
import unittest

from harness import PYTHON, TempDirTest, child_env, program, results, run, script, violations


class LogSinkTest(TempDirTest):
    def test_a_fifo_without_reader_does_not_block(self):
        fifo = self.path("log.fifo")
        os.mkfifo(fifo)
        try:
            proc = run([program("probe"), "backward", self.path("x.safetensors")], timeout=60, APPENDGUARD_LOG=fifo)
        except subprocess.TimeoutExpired:
            self.fail("the first report blocked opening a FIFO nobody reads")
        self.assertOk(proc)
        self.assertIn(f"cannot open APPENDGUARD_LOG file '{fifo}' (ENXIO)", proc.stderr)
        self.assertEqual(len(violations(proc.stderr)), 1)

    def test_a_reader_gone_does_not_kill_the_host_nor_lose_a_pending_sigpipe(self):
        fifo = self.path("log.fifo")
        os.mkfifo(fifo)
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        proc = subprocess.Popen([PYTHON, script("log_reader_gone.py"), self.path("y.safetensors")],
                                env=child_env(APPENDGUARD_LOG=fifo, APPENDGUARD_BACKTRACE="0"),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = proc.stdout.readline()
        self.assertEqual(first.strip(), "first=refused")
        text = os.read(reader, 1 << 16).decode()
        os.close(reader)
        out, err = proc.communicate("go\n", timeout=60)
        self.assertEqual(proc.returncode, 0, f"killed by SIGPIPE? {proc.returncode}\n{err}")
        r = results(first + out)
        self.assertEqual(r["second"], "refused")
        self.assertEqual(r["third"], "refused")
        self.assertEqual(r["still_pending"], "True")
        self.assertEqual(len(violations(text)), 1, text)
        self.assertEqual(err.count(f"cannot write to APPENDGUARD_LOG file '{fifo}' (EPIPE)"), 1, err)
        self.assertEqual(len(violations(err)), 2, err)  # not lost: on stderr

    def test_a_closed_stderr_pipe_does_not_kill_the_host(self):
        read_end, write_end = os.pipe()
        os.close(read_end)
        proc = subprocess.run([program("probe"), "backward", self.path("z.safetensors")], env=child_env(),
                              stdout=subprocess.PIPE, stderr=write_end, text=True, timeout=60)
        os.close(write_end)
        self.assertEqual(proc.returncode, 0, proc.stdout)

    def test_dev_full_gives_one_notice(self):
        proc = run([program("probe"), "backward", self.path("w.safetensors")], APPENDGUARD_LOG="/dev/full")
        self.assertOk(proc)
        self.assertEqual(proc.stderr.count("cannot write to APPENDGUARD_LOG file '/dev/full' (ENOSPC)"), 1,
                         proc.stderr)
        self.assertEqual(len(violations(proc.stderr)), 1)

    def test_an_expanded_path_too_long_gives_one_notice(self):
        template = self.dir + "/" + "%p" * 2000
        proc = run([program("probe"), "backward", self.path("v.safetensors")], APPENDGUARD_LOG=template)
        self.assertOk(proc)
        self.assertEqual(proc.stderr.count("its expanded path is longer than 4095 bytes"), 1, proc.stderr)
        self.assertEqual(len(violations(proc.stderr)), 1)

    def test_with_a_log_file_the_first_refusal_of_each_process_is_one_line_on_stderr(self):
        log = self.path("ag.log")
        target = self.path("r.safetensors")
        proc = run([PYTHON, script("random_writer.py"), target], APPENDGUARD_LOG=log)
        self.assertNotEqual(proc.returncode, 0)
        with open(log) as f:
            self.assertEqual(len(violations(f.read())), 2)  # the write flushed by seek, then by close
        self.assertEqual(violations(proc.stderr), [])
        pointers = [line for line in proc.stderr.splitlines() if line.startswith("appendguard:")]
        self.assertEqual(pointers, [f"appendguard: refused write on {target} (EOPNOTSUPP): report in {log} "
                                    "(this process's later refusals: only there)"], proc.stderr)

    def test_the_stderr_line_is_said_once_per_process(self):
        log = self.path("ag-%p.log")
        target = self.path("b.safetensors")
        proc = run([program("probe"), "backward", target], APPENDGUARD_LOG=log, APPENDGUARD_ON_VIOLATION="error")
        self.assertOk(proc)
        again = run([program("probe"), "backward", target], APPENDGUARD_LOG=log)
        for p in (proc, again):
            lines = [line for line in p.stderr.splitlines() if line.startswith("appendguard:")]
            self.assertEqual(len(lines), 1, p.stderr)
            self.assertRegex(lines[0], rf"^appendguard: refused write on {target} \(EOPNOTSUPP\): report in "
                                       rf"{self.dir}/ag-[0-9]+\.log ")

    def test_reports_on_stderr_add_no_line(self):
        proc = run([program("probe"), "backward", self.path("s.safetensors")])
        self.assertOk(proc)
        self.assertNotIn("appendguard: refused", proc.stderr)
        self.assertEqual(len(violations(proc.stderr)), 1)


if __name__ == "__main__":
    unittest.main()
