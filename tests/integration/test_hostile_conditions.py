"""Third adversarial round: a guarded file under hostile process conditions (docs/reliability.md).

Thread cancellation inside a guarded call, descriptors that go away without a close (close_range,
closefrom, dup2/dup3 onto them, close-on-exec), and a program that drops the library from the environment
of the program it execs. Probe: programs/hostile.c.
"""
import subprocess
import unittest

from harness import TempDirTest, program, read_bytes, results, run, violations


class CancelledThreadTest(TempDirTest):
    def test_a_thread_cancelled_inside_its_guarded_write_leaves_the_file_usable(self):
        # pthread_cancel acted on in the real write: the unwinding skipped our frames (built without
        # exceptions), so the file's lock stayed taken and the next write of the file waited forever.
        path = self.path("cancel.safetensors")
        try:
            proc = run([program("hostile"), "cancel", path], timeout=30)
        except subprocess.TimeoutExpired:
            self.fail("the write after the cancellation waited for the cancelled thread's lock")
        self.assertOk(proc)
        r = results(proc.stdout)
        self.assertEqual(r["cancelled"], "1")
        self.assertEqual(r["write_after"], "2")
        self.assertEqual(r["pwrite_back"], "-1 errno=EOPNOTSUPP")  # still guarded
        self.assertEqual(r["close"], "0")
        self.assertEqual(read_bytes(path), b"0123456789XY")
        self.assertEqual(len(violations(proc.stderr)), 1, proc.stderr)


class ImplicitCloseTest(TempDirTest):
    """A deferred preallocation (ftruncate to 8192 after a rewritten O_RDWR open) is completed by the
    file's last close; descriptors also go away by close_range, closefrom, dup2/dup3 onto their number, and
    close-on-exec. Without the library the file has 8192 bytes after each."""

    def check(self, how):
        path = self.path(f"{how}.safetensors")
        proc = run([program("hostile"), "implicit_close", path, how], APPENDGUARD_PREALLOC="defer")
        self.assertOk(proc)
        r = results(proc.stdout)
        self.assertEqual(r["ftruncate"], "0")
        self.assertEqual(r["write"], "10")
        self.assertEqual(r["gone"], "0", proc.stdout)
        self.assertEqual(r["size"], "8192", proc.stderr)
        self.assertEqual(read_bytes(path), b"0123456789" + bytes(8182))
        self.assertEqual(violations(proc.stderr), [])

    def test_close(self):
        self.check("close")

    def test_close_range(self):
        self.check("close_range")

    def test_close_range_unshare(self):
        self.check("close_range_unshare")

    def test_closefrom(self):
        self.check("closefrom")

    def test_dup2_onto_it(self):
        self.check("dup2")

    def test_dup3_onto_it(self):
        self.check("dup3")

    def test_close_on_exec(self):
        self.check("exec")


if __name__ == "__main__":
    unittest.main()
