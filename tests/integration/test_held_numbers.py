"""The numbers of held write sessions (APPENDGUARD_REOPEN=hold on a local directory): a number the program
closed stays open in the library until the real close (the commit). The program must see it closed all
along, and get it back only once the library no longer closes it."""
import os
import unittest

from harness import PRELOAD, TempDirTest, program, read_bytes, results, run


def slow_committer_preload():
    # After us in LD_PRELOAD: the committer thread's real close waits 100 ms with its number published.
    return PRELOAD + ":" + program("libslow_thread_close.so")


class HeldNumbersTest(TempDirTest):
    def during_commit(self, call, rounds=2):
        proc = run([program("held_numbers"), "during_commit", self.dir, call, str(rounds)],
                   LD_PRELOAD=slow_committer_preload(), APPENDGUARD_REOPEN="hold", APPENDGUARD_HOLD_SECONDS="1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        r = results(proc.stdout)
        self.assertEqual(r["rounds"], str(rounds))
        return int(r["lost"])

    # The committer thread takes a session out of the set, then closes its number. A descriptor the
    # program installs at that number in between (the number is free for it: its close returned 0) must
    # not be the one the committer closes. Before the fix every round lost the program's descriptor.
    def test_dup2_onto_a_number_being_committed_waits_for_the_commit(self):
        self.assertEqual(self.during_commit("dup2"), 0)

    def test_dup3_onto_a_number_being_committed_waits_for_the_commit(self):
        self.assertEqual(self.during_commit("dup3"), 0)

    def test_close_range_over_a_number_being_committed_waits_for_the_commit(self):
        self.assertEqual(self.during_commit("close_range"), 0)

    def test_closefrom_over_a_number_being_committed_waits_for_the_commit(self):
        self.assertEqual(self.during_commit("closefrom"), 0)

    def test_write_to_a_number_being_committed_fails_ebadf(self):
        self.assertEqual(self.during_commit("write"), 0)
        for round_ in range(2):
            self.assertEqual(read_bytes(self.path(f"r{round_}-0.safetensors")), b"HEADER")

    def test_calls_on_a_held_number_after_its_close_fail_ebadf(self):
        proc = run([program("held_numbers"), "use_after_close", self.dir], APPENDGUARD_REOPEN="hold")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        r = results(proc.stdout)
        self.assertEqual(r["close"], "0 errno=0")
        ebadf = "-1 errno=9"
        for name in ["write", "pwrite", "writev", "pwritev", "read", "pread", "lseek", "ftruncate", "fallocate",
                     "fsync", "fdatasync", "fstat", "dup", "dup2", "dup3", "fcntl_getfd", "fcntl_dupfd", "mmap",
                     "dprintf", "fdopen", "close_again"]:
            self.assertEqual(r[name], ebadf, name)
        self.assertEqual(r["posix_fallocate"], "9")  # it returns the error number
        self.assertEqual(r["mmap_anonymous"], "0 errno=0")  # MAP_ANONYMOUS ignores the descriptor
        # Committed at exit with only what was written before the close.
        self.assertEqual(read_bytes(self.path("uac.safetensors")), b"HEAD")
        self.assertNotIn("appendguard", proc.stderr)

    def test_the_committer_thread_starts_at_the_open_not_at_a_close_in_a_signal_handler(self):
        proc = run([program("held_numbers"), "committer_at_open", self.dir], APPENDGUARD_REOPEN="hold")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        r = results(proc.stdout)
        # The committer, before any close (under TSan its first pthread_create adds TSan's own thread).
        self.assertGreater(int(r["threads_after_open"]), int(r["threads_before"]))
        self.assertEqual(r["handler_close"], "0")  # held, in the handler
        self.assertEqual(r["threads_after_handler_close"], r["threads_after_open"])  # none created there
        self.assertEqual(read_bytes(self.path("thread.safetensors")), b"HEAD")

    def test_no_committer_thread_without_a_time_limit(self):
        proc = run([program("held_numbers"), "committer_at_open", self.dir], APPENDGUARD_REOPEN="hold",
                   APPENDGUARD_HOLD_SECONDS="0")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        r = results(proc.stdout)
        self.assertEqual(r["threads_after_open"], r["threads_before"])
        self.assertEqual(r["threads_after_handler_close"], r["threads_before"])

    def test_a_vfork_child_that_exits_without_exec_is_a_child_started(self):
        # Its exit closes its copy of the held descriptor (a FLUSH, the end of an upload on rclone), so the
        # reopen does not reuse the session: it is committed first and the file written anew.
        proc = run([program("held_numbers"), "vfork_exit", self.dir], APPENDGUARD_REOPEN="hold",
                   APPENDGUARD_TRACE="1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(results(proc.stdout)["vfork_exit"], "done")
        self.assertIn("vfork", proc.stderr)
        self.assertIn("committed before a reopen, since a child process started", proc.stderr)
        self.assertEqual(read_bytes(self.path("vfork.safetensors")), b"HEADTAIL")

    def test_a_fork_childs_copy_of_a_held_number_fails_ebadf_and_its_close_closes_it(self):
        proc = run([program("held_numbers"), "fork_close", self.dir], APPENDGUARD_REOPEN="hold")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        r = results(proc.stdout)
        self.assertEqual(r["child_inherited"], "1")
        self.assertEqual(r["child_write"], "-1 errno=9")
        self.assertEqual(r["child_close"], "-1 errno=9")
        self.assertEqual(r["child_still_open"], "0")  # the child's copy is gone
        self.assertEqual(read_bytes(self.path("fork.safetensors")), b"HEAD")

    def test_a_reopen_reuses_the_held_number(self):
        # The mark on a closed held number is replaced by the reopen's description: writes work again.
        code = ("import os, sys\n"
                "p = os.path.join(sys.argv[1], 'again.safetensors')\n"
                "fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)\n"
                "os.write(fd, b'HEAD')\n"
                "os.close(fd)\n"
                "try:\n"
                "    os.write(fd, b'X')\n"
                "    print('closed_write=ok')\n"
                "except OSError as e:\n"
                "    print('closed_write=%d' % e.errno)\n"
                "fd2 = os.open(p, os.O_WRONLY)\n"
                "os.lseek(fd2, 0, os.SEEK_END)\n"
                "os.write(fd2, b'TAIL')\n"
                "print('same_number=%d' % (fd2 == fd))\n"
                "os.close(fd2)\n")
        proc = run([os.environ.get("APPENDGUARD_TEST_PYTHON", "python3"), "-c", code, self.dir],
                   APPENDGUARD_REOPEN="hold")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        r = results(proc.stdout)
        self.assertEqual(r["closed_write"], "9")
        self.assertEqual(r["same_number"], "1")
        self.assertEqual(read_bytes(self.path("again.safetensors")), b"HEADTAIL")


if __name__ == "__main__":
    unittest.main()
