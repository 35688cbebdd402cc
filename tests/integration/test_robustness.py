"""Calls at awkward times: before our constructor, after exit, in signal handlers, around fork/vfork/exec."""
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from harness import LIB, PRELOAD, PYTHON, TempDirTest, child_env, program, read_bytes, results, run, script, violations


class RobustnessTest(TempDirTest):
    def test_another_librarys_constructor_is_guarded(self):
        path = self.path("early.safetensors")
        proc = run([program("early_main")], EARLY_PATH=path)
        self.assertOk(proc)
        r = results(proc.stdout)
        self.assertEqual(r["early_append"], "10")
        self.assertEqual(r["early_backward"], "-1")
        self.assertEqual(read_bytes(path), b"0123456789")
        self.assertEqual(len(violations(proc.stderr)), 1)

    def test_static_destructors_atexit_and_signal_handlers_are_guarded(self):
        path = self.path("late.safetensors")
        proc = run([program("late_writes"), path])
        self.assertOk(proc)
        r = results(proc.stdout)
        self.assertEqual(r["main_append"], "10 errno=0")
        self.assertEqual(r["signal_append"], "1 errno=0")
        self.assertEqual(r["signal_backward"], "-1 errno=95")
        self.assertEqual(r["atexit"], "-1 errno=95")
        self.assertEqual(r["static_destructor"], "-1 errno=95")
        self.assertEqual(read_bytes(path), b"0123456789s")
        self.assertEqual(len(violations(proc.stderr)), 3)
        # Inside the signal handler the report must not allocate: no demangling, no Python stack.
        self.assertIn("native stack", proc.stderr)

    def test_inherited_descriptor_is_adopted_across_exec(self):
        path = self.path("inherited.safetensors")
        # The shell (not preloaded) opens fd 3 truncating; the preloaded probe inherits it.
        proc = subprocess.run(["sh", "-c", f'exec "$0" inherited 3 3>"{path}"', program("probe")],
                              env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertOk(proc)
        r = results(proc.stdout)
        self.assertEqual(r["write"], "10")
        self.assertEqual(r["write_back"], "-1 errno=EOPNOTSUPP")
        self.assertIn("opened: (inherited)", proc.stderr)
        self.assertEqual(read_bytes(path), b"i" * 10)

    def test_spawning_a_child_does_not_drop_our_tracking(self):
        path = self.path("spawn.safetensors")
        proc = run([PYTHON, script("spawn_while_writing.py"), path])
        self.assertOk(proc)
        r = results(proc.stdout)
        self.assertEqual(r["write_back"], "EOPNOTSUPP")
        self.assertEqual(r["write_end"], "1")
        self.assertEqual(read_bytes(path), b"x" * 10 + b"z")

    def test_fork_while_another_thread_reports(self):
        log = self.path("reports.log")
        try:
            proc = run([program("fork_while_reporting"), self.path("a.safetensors"), self.path("b.safetensors")],
                       timeout=20, APPENDGUARD_LOG=log, APPENDGUARD_BACKTRACE="0")
        except subprocess.TimeoutExpired:
            self.fail("the child's report waited for a lock held by a thread of its parent")
        self.assertOk(proc)
        r = results(proc.stdout)
        self.assertEqual(r["child_exit"], "0")
        self.assertGreaterEqual(int(r["gethostname_calls"]), 1)  # the thread really was held in its report
        with open(log) as f:
            text = f.read()
        self.assertEqual(len(violations(text)), 2, text)

    def test_signal_handler_writing_the_file_its_thread_is_writing(self):
        path = self.path("reentry.safetensors")
        try:
            proc = run([program("signal_reentry"), path], timeout=60, APPENDGUARD_BACKTRACE="4")
        except subprocess.TimeoutExpired:
            self.fail("the handler's write waited for the lock its own thread holds")
        self.assertOk(proc)
        r = results(proc.stdout)
        self.assertEqual(r["main_written"], str(64 << 20))
        if r["handler_result"] == "-1":
            self.assertEqual(r["handler_errno"], "95")
            self.assertIn("a signal handler writes to the file whose write it interrupted", proc.stderr)
            self.assertEqual(os.path.getsize(path), 64 << 20)
        else:  # the signal came between two writes: an ordinary append
            self.assertEqual(r["handler_result"], "1")
            self.assertEqual(os.path.getsize(path), (64 << 20) + 1)

    def test_a_report_fits_a_small_thread_stack_and_a_small_sigaltstack(self):
        # A refused write reported from a thread with a 16 KiB stack, and from handlers left 16 and 8 KiB of
        # sigaltstack below the kernel's signal frame (mmap'ed with a guard page: an overflow is a SIGSEGV).
        # The frame's size depends on the processor (AVX-512's registers make it 3.5 KiB): the program adds
        # the frame it measures, so that the handler has the same room on every machine. The report
        # needed over 24 KiB.
        if os.environ.get("APPENDGUARD_TEST_SANITIZER_RUNTIME"):
            self.skipTest("sanitizer build: instrumented frames are several times larger; the plain build's run "
                          "of this test measures the report's stack")
        # Issue 24, item 6: also a 24 KiB thread, and a 16 KiB sigaltstack that holds an AVX-512 signal frame
        # (3.5 KiB at most: 12800 bytes left below it).
        for kind, size in (("thread", 16384), ("thread", 24576), ("handler", 16384), ("handler", 12800),
                           ("handler", 8192)):
            with self.subTest(kind=kind, size=size):
                proc = run([program("small_stack_report"), self.path(f"{kind}{size}.safetensors"), str(size), kind])
                self.assertOk(proc)
                r = results(proc.stdout)
                self.assertEqual(r["result"], "-1 errno=95")
                self.assertEqual(len(violations(proc.stderr)), 1, proc.stderr)
                if kind == "handler" and size < 13 * 1024:  # too little left for libunwind: the report says so
                    self.assertIn("native stack: left out", proc.stderr)
                else:
                    self.assertIn("native stack:\n", proc.stderr)

    # Issue 24, item 6: what each interposed call's common path adds to the stack, measured by painting the
    # stack of a thread below the caller's frame (programs/stack_budget.c), with and without the library.
    STACK_BUDGET = 2048
    # Every operation within it (issue 27): a guarded write open needed 5 KiB (a 4.5 KiB message buffer of a
    # notice in the frame of a test every open makes, and libunwind's 3 KiB recording the open's site, which
    # now runs on a stack of its own: report/site_stack.h).

    def stack_budget_dir(self, name):
        directory = self.path(name)
        os.mkdir(directory)
        return directory

    def test_every_hooks_common_path_fits_a_small_thread_stack(self):
        # Every write open needed 25-29 KiB: on a 24 KiB thread any of them crashed, even of t.bin.
        if os.environ.get("APPENDGUARD_TEST_SANITIZER_RUNTIME"):
            self.skipTest("sanitizer build: instrumented frames are several times larger")
        size = 16384 + self.STACK_BUDGET
        proc = run([program("stack_budget"), self.stack_budget_dir("run"), "run", str(size)])
        self.assertOk(proc)
        self.assertEqual(results(proc.stdout)["failures"], "0", proc.stderr)

    def test_the_processs_first_guarded_calls_fit_a_small_thread_stack(self):
        # The first guarded open reads the mount table (at its first use since issue 27): on a thread of
        # 18 KiB, with no call made before on the main thread, it overflowed the stack (a 16 KiB read buffer
        # in the frame: SIGSEGV). The library's first-use work runs on a stack of its own.
        if os.environ.get("APPENDGUARD_TEST_SANITIZER_RUNTIME"):
            self.skipTest("sanitizer build: instrumented frames are several times larger")
        proc = run([program("stack_budget"), self.stack_budget_dir("first"), "first", str(16384 + self.STACK_BUDGET)])
        self.assertOk(proc)
        self.assertEqual(results(proc.stdout)["failures"], "0", proc.stderr)

    def test_the_stack_each_hook_adds_is_within_the_budget(self):
        if os.environ.get("APPENDGUARD_TEST_SANITIZER_RUNTIME"):
            self.skipTest("sanitizer build: instrumented frames are several times larger")
        measured = {}
        for preload in (False, True):
            proc = run([program("stack_budget"), self.stack_budget_dir(f"measure{int(preload)}"), "measure"],
                       preload=preload)
            self.assertOk(proc)
            r = results(proc.stdout)
            self.assertEqual(r.pop("failures"), "0", proc.stderr)
            measured[preload] = {name: int(value) for name, value in r.items()}
        self.assertGreater(len(measured[True]), 30)
        for name, with_library in measured[True].items():
            added = with_library - measured[False][name]
            with self.subTest(operation=name):
                self.assertLessEqual(added, self.STACK_BUDGET)

    def path_forms(self, *args, **variables):
        proc = run([program("path_forms"), *args], **variables)
        self.assertOk(proc)
        return results(proc.stdout)["pwrite"]

    def test_one_rule_for_every_path_form_through_a_symlinked_directory(self):
        # Issue 24, item 17: with "DIR/lnk/**" (lnk -> real), the file was guarded by its path through the link
        # but not from a working directory inside lnk, by openat on lnk, or by its physical path.
        real = self.path("real")
        os.mkdir(real)
        os.symlink(real, self.path("lnk"))
        pattern = {"APPENDGUARD_PATHS": self.path("lnk") + "/**"}
        cases = [("absolute", self.path("lnk/f.bin")), ("relative", self.dir, "lnk/f.bin"),
                 ("relative", self.path("lnk"), "f.bin"), ("openat", self.path("lnk"), "f.bin"),
                 ("absolute", self.path("real/f.bin"))]
        for case in cases:
            with self.subTest(case=case):
                with open(self.path("real/f.bin"), "wb") as f:
                    f.write(b"0123456789")
                self.assertEqual(self.path_forms(*case, **pattern), "-1 errno=95")
                self.assertEqual(read_bytes(self.path("real/f.bin")), b"0123456789")

    def test_a_proc_self_fd_reopen_is_decided_on_the_file_it_names(self):
        # Issue 24, item 15: open("/proc/self/fd/N") of a guarded file was not guarded, on a mount guarded
        # whole (here the test directory's mount, named by APPENDGUARD_FS) or by name.
        mount = subprocess.run(["findmnt", "-n", "-o", "TARGET", "-T", self.dir], stdout=subprocess.PIPE,
                               text=True, check=True).stdout.strip()
        for name, variables in (("data.bin", {"APPENDGUARD_FS": mount, "APPENDGUARD_PATHS": "*.none"}),
                                ("m.safetensors", {})):
            with self.subTest(name=name):
                path = self.path(name)
                with open(path, "wb") as f:
                    f.write(b"0123456789")
                self.assertEqual(self.path_forms("procfd", path, **variables), "-1 errno=95")
                self.assertEqual(read_bytes(path), b"0123456789")
                # The control: without the library the byte lands at 0.
                proc = run([program("path_forms"), "procfd", path], preload=False)
                self.assertEqual(results(proc.stdout)["pwrite"], "1 errno=0")

    def test_every_path_form_onto_a_mount_guarded_whole_is_guarded(self):
        # Issue 27: an unmatched write open decides "on no append-only mount" from the path as given when
        # normalization would leave it as it is; every other form is resolved first. /dev/shm (its own
        # mount) is guarded whole here by APPENDGUARD_FS; the names match no pattern.
        if not os.path.ismount("/dev/shm") or not os.access("/dev/shm", os.W_OK):
            self.skipTest("/dev/shm is not a writable mount point here")
        shm = tempfile.mkdtemp(prefix="appendguard-test-", dir="/dev/shm")
        self.addCleanup(shutil.rmtree, shm, True)
        base = os.path.basename(shm)
        variables = {"APPENDGUARD_FS": "/dev/shm", "APPENDGUARD_PATHS": "*.none"}
        cases = [("absolute", f"{shm}/f.bin"), ("absolute", f"/usr/../dev/shm/{base}/f.bin"),
                 ("absolute", f"/dev//shm/{base}/f.bin"), ("absolute", f"/dev/./shm/{base}/./f.bin"),
                 ("absolute", f"/dev/shm/{base}/../{base}/f.bin"), ("relative", shm, "f.bin"),
                 ("relative", shm, f"../{base}/f.bin"), ("relative", "/", f"dev/shm/{base}/f.bin"),
                 ("relative", "/dev", f"shm/{base}/f.bin"), ("relative", "/usr", f"../dev/shm/{base}/f.bin"),
                 ("relative", "/usr", f"..//dev/shm/{base}/f.bin"), ("openat", shm, "f.bin"),
                 ("openat", "/dev", f"shm/{base}/f.bin"), ("openat", "/usr", f"../dev/shm/{base}/f.bin")]
        for case in cases:
            with self.subTest(case=case):
                with open(f"{shm}/f.bin", "wb") as f:
                    f.write(b"0123456789")
                self.assertEqual(self.path_forms(*case, **variables), "-1 errno=95")
                self.assertEqual(read_bytes(f"{shm}/f.bin"), b"0123456789")
        # The control: a file off that mount is not guarded (the byte lands at 0).
        outside = self.path("f.bin")
        for case in [("absolute", outside), ("relative", self.dir, "f.bin"),
                     ("absolute", f"/dev/shm/../..{outside}")]:
            with self.subTest(case=case):
                with open(outside, "wb") as f:
                    f.write(b"0123456789")
                self.assertEqual(self.path_forms(*case, **variables), "1 errno=0")

    def test_a_small_address_space_limit_still_loads_and_guards(self):
        # Issue 24, item 14: two tables of 2^20 descriptor slots (16 MiB of .bss) kept the library from
        # loading under `ulimit -v` below 17.75 MB (the loader said "cannot be preloaded" and the program ran
        # unguarded). Now it adds about 1 MB: at 8 MB a backward write is refused and reported.
        if os.environ.get("APPENDGUARD_TEST_SANITIZER_RUNTIME"):
            self.skipTest("sanitizer build: the sanitizer's shadow memory needs terabytes of address space")
        path = self.path("small.safetensors")
        proc = subprocess.run(["sh", "-c", 'ulimit -v 8192 && exec "$0" backward "$1"', program("probe"), path],
                              env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertOk(proc)
        self.assertNotIn("cannot be preloaded", proc.stderr)
        self.assertEqual(results(proc.stdout)["write_back"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(len(violations(proc.stderr)), 1, proc.stderr)

    def test_an_exec_that_leaves_guarded_descriptors_unchecked_is_said(self):
        # Issue 24, "documented, still silent": a statically linked or set-uid program does not load the
        # library, so the guarded descriptors it inherits are not checked there: said at the exec.
        if os.environ.get("APPENDGUARD_TEST_SANITIZER_RUNTIME"):
            self.skipTest("static_probe is not built in sanitizer builds (a static binary cannot take the runtime)")
        setuid = self.path("setuid_true")
        shutil.copy("/bin/true", setuid)
        os.chmod(setuid, 0o4755)
        code = ("import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644); "
                "os.set_inheritable(fd, sys.argv[3] == 'inherit'); os.execv(sys.argv[2], [sys.argv[2]])")
        cases = [(program("static_probe"), "inherit", "statically linked"),
                 (setuid, "inherit", "a set-uid or set-gid program"),
                 ("/bin/true", "inherit", None), (program("static_probe"), "cloexec", None)]
        for target, inherit, said in cases:
            with self.subTest(target=target, inherit=inherit):
                proc = run([PYTHON, "-c", code, self.path("exec.safetensors"), target, inherit])
                lines = [line for line in proc.stderr.splitlines() if "inherits 1 guarded descriptor" in line]
                if said:
                    self.assertEqual(len(lines), 1, proc.stderr)
                    self.assertIn(said, lines[0])
                    self.assertIn("exec.safetensors", lines[0])
                else:
                    self.assertEqual(lines, [], proc.stderr)

    def test_a_report_inside_a_signal_handler_does_not_allocate(self):
        # The handler may have interrupted malloc (its lock is not recursive): the report names frames
        # with dladdr only and neither demangles nor reads the Python stack.
        if os.environ.get("APPENDGUARD_TEST_SANITIZER_RUNTIME"):
            self.skipTest("sanitizer build: the program replaces malloc, which the sanitizer runtime owns; the "
                          "plain build's run of this test counts the handler's allocations")
        for report_format in ("text", "json"):
            with self.subTest(format=report_format):
                path = self.path(f"handler-{report_format}.safetensors")
                proc = run([program("handler_alloc"), path], APPENDGUARD_FORMAT=report_format)
                self.assertOk(proc)
                r = results(proc.stdout)
                self.assertGreater(int(r["control_allocations"]), 0)  # the counter sees libc's own allocations
                self.assertEqual(r["handler_write"], "-1 errno=95")
                self.assertEqual(r["handler_allocations"], "0", proc.stderr)
                if report_format == "text":
                    self.assertEqual(len(violations(proc.stderr)), 1, proc.stderr)
                    self.assertRegex(proc.stderr, r"native stack:\n    #0 ")
                else:
                    self.assertIn('"native_stack":', proc.stderr)
                self.assertEqual(read_bytes(path), b"0123456789")

    def faulty_libc_env(self, kind):
        # fault_libc comes after us in LD_PRELOAD: our calls to the "real" write land in it.
        return {"LD_PRELOAD": PRELOAD + ":" + program("libfault_libc.so"), "FAULT_KIND": kind, "FAULT_EVERY": "3"}

    def expected_chunks(self, count):
        return b"".join(bytes([ord("a") + i % 26]) * (1 + (i * 37) % 3000) for i in range(count))

    def test_eintr_and_short_writes_below_us_leave_the_file_exact(self):
        for kind in ("eintr", "short"):
            with self.subTest(kind=kind):
                path = self.path(f"{kind}.safetensors")
                proc = run([program("probe"), "chunks", path, "300"], **self.faulty_libc_env(kind))
                self.assertOk(proc)
                r = results(proc.stdout)
                expected = self.expected_chunks(300)
                self.assertGreater(int(r["retries"]), 50)  # the faults really happened
                self.assertEqual(r["total"], str(len(expected)))
                self.assertEqual(r["position"], str(len(expected)))
                self.assertEqual(r["end"], str(len(expected)))
                self.assertEqual(violations(proc.stderr), [])
                self.assertEqual(read_bytes(path), expected)

    def test_python_retries_through_eintr_and_short_writes(self):
        code = ("import sys\n"
                "with open(sys.argv[1], 'wb') as f: f.write(b'H' * 100)\n"
                "with open(sys.argv[1], 'r+b') as f:\n"
                "    f.seek(0, 2)\n"
                "    for i in range(200): f.write(bytes([65 + i % 26]) * (100 + i * 91 % 9000))\n"
                "    print('tell=%d' % f.tell())\n")
        expected = b"H" * 100 + b"".join(bytes([65 + i % 26]) * (100 + i * 91 % 9000) for i in range(200))
        for kind in ("eintr", "short"):
            with self.subTest(kind=kind):
                path = self.path(f"py-{kind}.safetensors")
                proc = run([PYTHON, "-c", code, path], **self.faulty_libc_env(kind))
                self.assertOk(proc)
                injected = int(proc.stderr.split("fault_libc: injected=")[1].split()[0])
                self.assertGreater(injected, 10)  # the faults really happened
                self.assertEqual(results(proc.stdout)["tell"], str(len(expected)))
                self.assertEqual(violations(proc.stderr), [])
                self.assertEqual(read_bytes(path), expected)

    def test_unknown_descriptors_and_null_paths_get_libc_answers(self):
        code = ("import ctypes, os\n"
                "libc = ctypes.CDLL(None, use_errno=True)\n"
                "print('write_badfd=%d errno=%d' % (libc.write(12345, b'x', 1), ctypes.get_errno()))\n"
                "print('open_null=%d errno=%d' % (libc.open(None, os.O_RDWR), ctypes.get_errno()))\n"
                "print('lseek_badfd=%d errno=%d' % (libc.lseek(-1, 0, 0), ctypes.get_errno()))\n")
        proc = run([PYTHON, "-c", code])
        self.assertOk(proc)
        r = results(proc.stdout)
        self.assertEqual(r["write_badfd"], "-1 errno=9")
        self.assertEqual(r["open_null"], "-1 errno=14")
        self.assertEqual(r["lseek_badfd"], "-1 errno=9")

    def test_held_sessions_committed_by_the_time_limit_while_threads_reopen_them(self):
        # APPENDGUARD_HOLD_SECONDS=1: the committer thread closes a held file nobody reopens (its number
        # leaves /proc/self/fd), and races threads that reopen their files around the limit: each reopen
        # either got the held descriptor or opened the committed file anew; the bytes are right either way.
        code = ("import os, random, sys, threading, time\n"
                "d = sys.argv[1]\n"
                "def header(p):\n"
                "    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)\n"
                "    os.write(fd, b'H' * 64)\n"
                "    os.close(fd)\n"
                "    return fd\n"
                "fd = header(os.path.join(d, 'alone.safetensors'))\n"
                "end = time.monotonic() + 60\n"
                "while os.path.exists(f'/proc/self/fd/{fd}') and time.monotonic() < end:\n"
                "    time.sleep(0.01)\n"
                "print('alone_committed=%d' % (not os.path.exists(f'/proc/self/fd/{fd}')))\n"
                "def worker(i):\n"
                "    for k in range(3):\n"
                "        p = os.path.join(d, f'{i}-{k}.safetensors')\n"
                "        header(p)\n"
                "        time.sleep(random.uniform(0.9, 1.1))\n"
                "        with open(p, 'r+b') as f:\n"
                "            f.seek(0, os.SEEK_END)\n"
                "            f.write(bytes([48 + i]) * 1000)\n"
                "threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]\n"
                "for t in threads: t.start()\n"
                "for t in threads: t.join()\n")
        proc = run([PYTHON, "-c", code, self.dir], APPENDGUARD_REOPEN="hold", APPENDGUARD_HOLD_SECONDS="1")
        self.assertOk(proc)
        self.assertEqual(results(proc.stdout)["alone_committed"], "1")
        self.assertEqual(violations(proc.stderr), [])
        self.assertNotIn("appendguard", proc.stderr)
        for i in range(4):
            for k in range(3):
                self.assertEqual(read_bytes(self.path(f"{i}-{k}.safetensors")), b"H" * 64 + bytes([48 + i]) * 1000)


if __name__ == "__main__":
    unittest.main()
