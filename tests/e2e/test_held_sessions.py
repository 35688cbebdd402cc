"""Held write sessions on the two write-once stores this machine runs: appendonlyfs's s3 profile (as
mountpoint-s3) and Debian's rclone with --vfs-cache-mode off. With no appendguard variable but APPENDGUARD=1
the library recognises both from /proc/self/mountinfo, holds each file's first write session ("wb", closed)
and hands it back to the reopen, so that:
* the DCP imitation (4 files, 4 threads), C stdio and C++ streams write byte for byte what a local disk
  gets, and the library prints nothing;
* a writer killed with SIGKILL at random moments leaves a prefix of the right file (the kernel's close
  commits what was written), never anything else;
* a held file read by the same process shows its bytes (the read commits it; the reopen then writes the
  file anew);
* the held descriptor is never open in an exec'd program (a spawned child's, or the process's own exec);
* a child forked while a session is held does not break the parent's file.
The bytes are read from the backing directory. Exits 77 (skip) without FUSE or rclone, unless
APPENDGUARD_REQUIRE_FUSE=1 (CI), which makes either a failure.
"""
import os
import random
import signal
import subprocess
import sys
import time
import unittest

import e2e_support
from e2e_support import AOFS, DCP, PYTHON, aofs, e2e_program, e2e_script, files_of, harness, read_bytes, results
from rclone_mount import RCLONE, rclone_mounted

sys.path.insert(0, e2e_support.SCRIPTS)
import held_session  # noqa: E402  (the expected bytes)

SCRIPT = e2e_script("held_session.py")
STDIO = e2e_program("e2e_stdio_append")
STREAM = e2e_program("e2e_stream_append")
DCP_ARGS = ["--files", "4", "--tensors", "4", "--tensor-bytes", "16384", "--workers", "4"]
KILLS = 10  # per store: 20 in all
KILL_TENSORS, KILL_SIZE, KILL_PAUSE = 40, 8192, 0.005


class HeldSessions:
    """The tests, run on each store by the subclasses (store() mounts and returns (mount, backing))."""

    def m(self, name):
        return os.path.join(self.mnt, name)

    def b(self, name):
        return os.path.join(self.backing, name)

    def setUp(self):
        super().setUp()
        self.mnt, self.backing = self.store()

    def settled(self, path, timeout=5.0):
        return e2e_support.settled(path, timeout, interval=0.05)

    def test_dcp_imitation_with_library_alone_is_byte_identical_to_local(self):
        local = os.path.join(self.dir, "local")
        proc = harness.run([PYTHON, DCP, local, *DCP_ARGS], mode=None, preload=False)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        proc = harness.run([PYTHON, DCP, self.m("out"), *DCP_ARGS])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("appendguard", proc.stderr)
        written, expected = files_of(self.b("out")), files_of(local)
        self.assertEqual(sorted(written), sorted(expected))
        self.assertEqual(len(expected), 5)
        for name in expected:
            self.assertTrue(written[name] == expected[name], f"{name}: different bytes")

    def check_program(self, program):
        proc = harness.run([program, self.m("s.safetensors"), "4", "5000"])
        self.assertEqual(proc.returncode, 0, f"{proc.stdout}\n{proc.stderr}")
        self.assertNotIn("appendguard", proc.stderr)
        self.assertEqual(self.settled(self.b("s.safetensors")), held_session.expected(4, 5000))

    def test_c_stdio_with_library_alone(self):
        self.check_program(STDIO)

    def test_cpp_streams_with_library_alone(self):
        self.check_program(STREAM)

    def run_script(self, mode, name="h.safetensors"):
        proc = harness.run([PYTHON, SCRIPT, mode, self.m(name)])
        self.assertEqual(proc.returncode, 0, f"{proc.stdout}\n{proc.stderr}")
        self.assertNotIn("appendguard", proc.stderr)
        self.assertEqual(self.settled(self.b(name)), held_session.expected(4, 5000))
        return results(proc.stdout)

    def test_a_held_file_read_by_the_same_process_shows_its_bytes(self):
        self.assertEqual(self.run_script("read")["read_ok"], "1")

    def test_a_spawned_child_never_has_the_held_descriptor(self):
        r = self.run_script("spawn")
        self.assertTrue(r["child_files"], r)
        self.assertNotIn("h.safetensors", r["child_files"])

    def test_exec_commits_the_held_session_and_the_new_program_does_not_have_it(self):
        r = self.run_script("exec")
        self.assertEqual(r["held_file_open_in_child"], "0")
        self.assertEqual(r["header_committed"], "1")

    def test_a_child_forked_while_the_session_is_held_does_not_break_the_file(self):
        self.run_script("fork")

    def test_children_started_by_subprocess_system_and_popen_do_not_break_the_file(self):
        # system() and popen() spawn with glibc's internal posix_spawn: before hooks_spawn.cpp counted them,
        # the child's close-on-exec close ended rclone's upload and the reused descriptor failed EBADF
        # (64 of 20064 bytes on the store).
        for mode in ("subprocess", "system", "popen"):
            with self.subTest(mode):
                self.run_script(mode, f"{mode}.safetensors")

    def test_a_vfork_child_that_exits_without_exec_does_not_break_the_file(self):
        # Its exit closes its copy of the held descriptor. Before the vfork hook counted it as a child
        # started, the reopen reused the session whose upload that close had ended (nothing saw the child).
        name = "vfork.safetensors"
        proc = harness.run([e2e_program("e2e_vfork_exit"), self.m(name)])
        self.assertEqual(proc.returncode, 0, f"{proc.stdout}\n{proc.stderr}")
        self.assertEqual(results(proc.stdout)["done"], "1")
        self.assertEqual(self.settled(self.b(name)), b"H" * 64 + b"".join(bytes([48 + i]) * 5000 for i in range(4)))

    def test_a_held_file_is_committed_after_the_time_limit_and_a_later_reopen_still_works(self):
        name = "t.safetensors"
        process = subprocess.Popen([PYTHON, SCRIPT, "wait", self.m(name)],
                                   env=harness.child_env(APPENDGUARD_HOLD_SECONDS="1", APPENDGUARD_TRACE="1"),
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(process.kill)
        self.assertTrue(process.stdout.readline().startswith("held_fd="))
        self.assertEqual(process.stdout.readline(), "held\n")
        trace = []
        for line in process.stderr:  # the committer thread's trace line; the program is blocked on stdin
            trace.append(line)
            if "held session committed after 1 s without a reopen" in line:
                break
        self.assertIn("held session committed after 1 s without a reopen", trace[-1], trace)
        # A second process sees the whole header through the store while the writer still runs.
        reader = harness.run([PYTHON, "-c", "import sys\nprint(len(open(sys.argv[1], 'rb').read()))", self.m(name)],
                             mode=None, preload=False)
        self.assertEqual(reader.stdout.strip(), "64", reader.stderr)
        out, err = process.communicate("\n", timeout=60)
        self.assertEqual(process.returncode, 0, err)
        self.assertIn("done=1", out)
        self.assertEqual(self.settled(self.b(name)), held_session.expected(4, 5000))

    def append_to_file_of_another_process(self, size):
        with open(self.m("o.safetensors"), "wb") as f:  # written without the library: nothing held
            f.write(b"O" * size)
        self.assertEqual(self.settled(self.b("o.safetensors")), b"O" * size)
        return harness.run([PYTHON, "-c", "import sys\nwith open(sys.argv[1], 'ab') as f: f.write(b'T' * 100)",
                            self.m("o.safetensors")])

    def test_a_small_file_of_another_process_is_written_anew(self):
        proc = self.append_to_file_of_another_process(4096)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("appendguard", proc.stderr)
        self.assertEqual(self.settled(self.b("o.safetensors")), b"O" * 4096 + b"T" * 100)

    def test_a_file_of_another_process_above_8_mib_is_not_written_anew(self):
        # The write-back's loss window (a SIGKILL there truncates the file) is bounded: above 8 MiB the
        # open fails with EFBIG and a report, and the file keeps its bytes.
        size = 8 * 1024 * 1024 + 1
        proc = self.append_to_file_of_another_process(size)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("[Errno 27] File too large", proc.stderr)
        self.assertIn(f"only up to 8388608 bytes, since a process killed during the write-back leaves it truncated; "
                      f"it has {size}: the open fails with EFBIG and the file is unchanged", proc.stderr)
        self.assertEqual(os.path.getsize(self.b("o.safetensors")), size)

    def test_sigkill_at_random_moments_leaves_a_prefix_of_the_file(self):
        rng = random.Random()
        seed = rng.randrange(1 << 30)
        rng.seed(seed)
        expected = held_session.expected(KILL_TENSORS, KILL_SIZE)
        lengths = []
        for i in range(KILLS):
            name = f"k{i}.safetensors"
            process = subprocess.Popen([PYTHON, SCRIPT, "write", self.m(name), str(KILL_TENSORS), str(KILL_SIZE),
                                        str(KILL_PAUSE)], env=harness.child_env(), stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE)
            process.stdout.readline()  # held_fd=...: the header is written and closed (held)
            time.sleep(rng.uniform(0, KILL_TENSORS * KILL_PAUSE * 1.2))
            process.send_signal(signal.SIGKILL)
            _, stderr = process.communicate()
            self.assertNotIn(b"appendguard", stderr)
            data = self.settled(self.b(name)) or b""
            lengths.append(len(data))
            self.assertTrue(expected.startswith(data), f"seed {seed}, kill {i}: {len(data)} bytes, not a prefix")
        print(f"{type(self).__name__}: seed {seed}, bytes left by {KILLS} kills: {lengths} of {len(expected)}",
              file=sys.stderr)


class AppendonlyfsS3(HeldSessions, e2e_support.MountTest):
    def store(self):
        return self.mount("s3")[::-1]

    def tearDown(self):
        self.assertEqual(self.log_lines(), [], "the s3 profile refused something")
        super().tearDown()


class RcloneCacheOff(HeldSessions, harness.TempDirTest):
    def store(self):
        backing, mnt, self.rclone_log = self.enterContext(
            rclone_mounted(self.dir, "off", on_mount=e2e_support.ACTIVE_MOUNTS.add))
        self.addCleanup(e2e_support.ACTIVE_MOUNTS.discard, mnt)
        return mnt, backing

    def tearDown(self):
        with open(self.rclone_log) as f:
            log = f.read()
        self.assertNotIn("ERROR", log)
        super().tearDown()


class FailedUpload(e2e_support.MountTest):
    """appendonlyfs s3 with -o flush_eio: every close fails EIO, as a store whose upload failed."""

    def setUp(self):
        super().setUp()
        self.backing, self.mnt = self.mount("s3", options=("flush_eio",))

    def test_the_failed_commit_is_returned_to_the_reopened_descriptors_close(self):
        proc = harness.run([PYTHON, SCRIPT, "write", os.path.join(self.mnt, "f.safetensors")])
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("OSError: [Errno 5] Input/output error", proc.stderr)  # the "r+b" file's close
        self.assertIn("held_fd=", proc.stdout)  # the header's close returned 0: held

    def test_a_failed_commit_at_exit_is_reported_in_one_line(self):
        code = "import os, sys\nfd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n" \
               "os.write(fd, b'H' * 64)\nos.close(fd)\nprint('closed')"
        proc = harness.run([PYTHON, "-c", code, os.path.join(self.mnt, "g.safetensors")])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "closed\n")
        lines = [line for line in proc.stderr.splitlines() if line.startswith("appendguard")]
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn("g.safetensors: the held write session (fd 3, opened O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 64 bytes "
                      "written) "
                      "was committed at exit, and its real close failed with EIO: the store refused the upload",
                      lines[0])


class MountedAfterStartUp(e2e_support.MountTest):
    def test_a_store_mounted_after_start_up_is_recognised_by_its_device(self):
        # The process reads mountinfo at start-up, before the s3 mount exists; its first guarded file
        # there is on a device the table does not know, so the table is read again and the session held.
        process = subprocess.Popen([PYTHON, SCRIPT, "later", "h.safetensors"], env=harness.child_env(),
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(process.kill)
        self.assertEqual(process.stdout.readline(), "ready\n")
        backing, mnt = self.mount("s3")
        out, err = process.communicate(mnt + "\n", timeout=60)
        self.assertEqual(process.returncode, 0, err)
        self.assertNotIn("appendguard", err)
        self.assertEqual(read_bytes(os.path.join(backing, "h.safetensors")), held_session.expected(4, 5000))
        self.assertEqual(self.log_lines(), [])


class LocalDiskWithHold(harness.TempDirTest):
    """APPENDGUARD_REOPEN=hold on a local directory: what commits a held session, seen in the trace."""

    def run_code(self, code, *args):
        proc = harness.run([PYTHON, "-c", code, *args], APPENDGUARD_REOPEN="hold", APPENDGUARD_TRACE="1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc.stdout, [line for line in proc.stderr.splitlines() if line.startswith("appendguard")]

    HEADER = "import os, sys\ndef header(p):\n    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n" \
             "    os.write(fd, b'H' * 64)\n    return fd\n"

    def test_fsync_before_close_commits(self):
        code = self.HEADER + "fd = header(sys.argv[1])\nos.fsync(fd)\nos.close(fd)\nprint('ok')"
        _, lines = self.run_code(code, self.path("a.safetensors"))
        closes = [line for line in lines if " close fd=" in line]
        self.assertEqual(len(closes), 1, lines)
        self.assertNotIn("held:", closes[0])  # not "held" alone: a path may contain it

    def test_the_65th_held_file_commits_the_oldest(self):
        code = self.HEADER + "for i in range(65):\n    os.close(header(os.path.join(sys.argv[1], f'{i}.safetensors')))\n" \
                             "os._exit(0)"
        _, lines = self.run_code(code, self.dir)
        commits = [line for line in lines if "held session committed" in line]
        self.assertEqual(len(commits), 1, lines)
        self.assertRegex(commits[0], r"/0\.safetensors time=\d+\.\d{6} held session committed because 64 files were "
                                     r"held \(the oldest goes first\)")

    def test_a_second_close_fails_ebadf_and_dup2_onto_the_number_commits_first(self):
        code = self.HEADER + ("fd = header(sys.argv[1])\nos.close(fd)\n"
                              "try:\n    os.close(fd)\nexcept OSError as e:\n    print(f'second_close={e.errno}')\n"
                              "os.dup2(1, fd)\nos.close(fd)\n"
                              "print('size=%d' % os.path.getsize(sys.argv[1]))")
        out, lines = self.run_code(code, self.path("b.safetensors"))
        self.assertIn("second_close=9", out)  # EBADF
        self.assertIn("size=64", out)
        self.assertTrue(any("held session committed before dup2 onto its number" in line for line in lines), lines)

    def test_the_exit_summary_counts_held_sessions(self):
        code = self.HEADER + ("for name in ('c', 'd'):\n    p = os.path.join(sys.argv[1], name + '.safetensors')\n"
                              "    os.close(header(p))\n    fd = os.open(p, os.O_RDWR)\n    os.close(fd)\n")
        proc = harness.run([PYTHON, "-c", code, self.dir], APPENDGUARD_REOPEN="hold", APPENDGUARD_SUMMARY="1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        summaries = [line for line in proc.stderr.splitlines() if "appendguard: summary:" in line]
        self.assertEqual(len(summaries), 1, proc.stderr)
        self.assertIn(" held_sessions=2", summaries[0])


def main():
    aofs.skip_or_fail_without_fuse("held-session tests")
    if RCLONE is None:
        if aofs.fuse_required():
            print("FAIL: rclone is not installed and APPENDGUARD_REQUIRE_FUSE=1", file=sys.stderr)
            sys.exit(1)
        print("SKIP: rclone is not installed (apt-get install rclone)")
        sys.exit(aofs.SKIP_RETURN_CODE)
    if not AOFS:
        print("FAIL: APPENDONLYFS is not set; run through ctest", file=sys.stderr)
        sys.exit(1)
    e2e_support.check_library_is_effective()
    e2e_support.install_signal_handlers()
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
