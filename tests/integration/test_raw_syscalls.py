"""The raw-system-call layer (src/shim/syscall_dispatch.cpp): system calls made without libc (a `syscall`
instruction of the program: tests/integration/programs/raw_syscalls.c) take the decisions of their libc
twins where Syscall User Dispatch can be armed, and APPENDGUARD_SYSCALLS=off brings back what the library
did before it (raw calls unseen)."""
import os
import re
import subprocess
import unittest

from harness import TempDirTest, child_env, program, read_bytes, results, run, violations

CLIENT_PYTHON = os.environ.get("APPENDGUARD_CLIENT_PYTHON", "")


def layer_available():
    """Whether this kernel has Syscall User Dispatch (Linux 5.11+)."""
    release = os.uname().release.split("-")[0].split(".")
    return (int(release[0]), int(release[1])) >= (5, 11)


class RawSyscallsTest(TempDirTest):
    def setUp(self):
        super().setUp()
        if not layer_available():
            self.skipTest("Syscall User Dispatch needs Linux 5.11+")

    def probe(self, case, **variables):
        variables.setdefault("APPENDGUARD_PATHS", os.path.join(self.dir, "**"))
        variables.setdefault("APPENDGUARD_BACKTRACE", "0")
        proc = run([program("raw_syscalls"), case, self.dir], **variables)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr[-3000:])
        return results(proc.stdout), proc.stderr

    def test_a_raw_pwrite64_at_0_of_a_guarded_file_is_refused_with_a_report(self):
        r, err = self.probe("pwrite")
        self.assertEqual(r["pwrite64_at_0"], str(-95))  # -EOPNOTSUPP, as libc's pwrite64 gets
        self.assertEqual(r["pwrite64_at_end"], "4")
        self.assertEqual(len([v for v in violations(err) if " pwrite64 " in v]), 1, err)
        self.assertEqual(read_bytes(os.path.join(self.dir, "witness.safetensors")), b"abcdefgh")

    def test_the_loaders_own_calls_under_ld_debug_after_a_guarded_open(self):
        # LD_DEBUG=bindings: the loader writes a line per symbol bound after the guarded open, from its own
        # text (trapped). Before: the guard of that write resolved libc's writev by a dlsym, whose own line
        # was trapped and guarded again, until the stack ran out: SIGSEGV (exit 139) in every such program.
        r, err = self.probe("pwrite", LD_DEBUG="bindings")
        self.assertEqual(r["pwrite64_at_0"], str(-95))
        self.assertEqual(len([v for v in violations(err) if " pwrite64 " in v]), 1, err[-3000:])
        self.assertIn("binding file", err)
        self.assertEqual(read_bytes(os.path.join(self.dir, "witness.safetensors")), b"abcdefgh")

    def test_libcs_syscall_function_takes_the_same_decisions(self):
        r, err = self.probe("libc_syscall")
        self.assertEqual(r["syscall_pwrite64_at_0"], "-1 errno=95")
        self.assertEqual(r["syscall_getppid_ok"], "1")
        self.assertEqual(len([v for v in violations(err) if " pwrite64 " in v]), 1, err)
        r, err = self.probe("libc_syscall", APPENDGUARD_SYSCALLS="off")
        self.assertEqual(r["syscall_pwrite64_at_0"], "4 errno=0")  # as before the layer
        self.assertEqual(violations(err), [])

    def test_where_the_layer_is_refused_one_line_says_so_only_when_a_guarded_file_is_opened(self):
        r, err = self.probe("seccomp_exec")  # prctl(PR_SET_SYSCALL_USER_DISPATCH) fails EPERM
        self.assertEqual(r["pwrite64_at_0"], "4")  # not covered: the raw write lands, as before
        lines = re.findall(r"^appendguard: system calls made outside libc .*$", err, re.M)
        self.assertEqual(lines, ["appendguard: system calls made outside libc (raw syscall instructions: Rust's "
                                 "rustix, io_uring, Go) are not guarded in this process: "
                                 "prctl(PR_SET_SYSCALL_USER_DISPATCH) was refused: EPERM; calls through libc "
                                 "are"], err)
        proc = run([program("raw_syscalls"), "seccomp_exec", self.dir, "nothing"])
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))  # nothing guarded was opened: silent

    def test_where_the_layer_is_refused_the_line_is_said_once_per_process(self):
        # Each guarded open asks whether the line was said in this process (a marker of the process's id,
        # issue 27: the line was formatted at every one); a fork child is a process of its own.
        proc = run([program("raw_syscalls"), "seccomp_exec", self.dir, "opens_then_forks"],
                   APPENDGUARD_PATHS=os.path.join(self.dir, "**"), APPENDGUARD_BACKTRACE="0")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr[-3000:])
        self.assertEqual(results(proc.stdout)["child_status"], "0", proc.stderr)
        lines = re.findall(r"^appendguard: system calls made outside libc .*$", proc.stderr, re.M)
        self.assertEqual(len(lines), 2, proc.stderr)  # the parent's (three opens) and the child's (two)

    def test_off_brings_back_raw_calls_unseen(self):
        r, err = self.probe("pwrite", APPENDGUARD_SYSCALLS="off")
        self.assertEqual(r["pwrite64_at_0"], "4")  # written at 0, as without the layer
        self.assertEqual(violations(err), [])
        self.assertEqual(read_bytes(os.path.join(self.dir, "witness.safetensors")), b"0000efgh")

    def test_a_raw_openat_o_rdwr_is_rewritten_and_tracked(self):
        r, err = self.probe("openat", APPENDGUARD_TRACE="1")
        self.assertEqual(r["raw_openat"], "ok")
        self.assertRegex(err, r"trace: .* openat fd=\d+ \S+existing.safetensors time=\S+ flags=O_RDWR "
                              r"effective=O_WRONLY\|O_APPEND")
        self.assertEqual(r["raw_pwrite64_at_0"], str(-95))
        self.assertEqual(r["raw_write_at_0"], str(-95))  # the position is 0, as for libc's write
        self.assertEqual(r["raw_lseek_end"], "4")
        self.assertEqual(r["raw_write_at_end"], "4")
        self.assertEqual(read_bytes(os.path.join(self.dir, "existing.safetensors")), b"wxyz6666")

    def test_auto_leaves_raw_calls_alone_until_a_guarded_file_is_open_and_always_does_not(self):
        r, _ = self.probe("cold_openat")
        self.assertEqual(r["raw_pwrite64_at_0"], "4")  # auto: nothing was open, nothing trapped
        r, err = self.probe("cold_openat", APPENDGUARD_SYSCALLS="always")
        self.assertEqual(r["raw_pwrite64_at_0"], str(-95))
        self.assertTrue(violations(err))

    def test_a_raw_renameat_is_traced(self):
        r, err = self.probe("rename", APPENDGUARD_TRACE="1")
        self.assertEqual(r["renameat"], "0")
        self.assertRegex(err, r"trace: .* renameat fd=-1 \S+/model.safetensors.tmp time=\S+ to \S+/model.safetensors "
                              r"flags=0 \(raw system call\) -> 0")
        self.assertTrue(os.path.exists(os.path.join(self.dir, "model.safetensors")))

    def test_raw_clone3_clone_and_fork_children_are_guarded_as_fork_children_are(self):
        for case in ("clone3", "clone", "fork", "libc_fork"):
            with self.subTest(case=case):
                r, err = self.probe(case)
                self.assertEqual(r["child_status"], "0", err)  # the child's own asserts
                self.assertEqual(r["child_pwrite64_at_0"], str(-95))
                self.assertEqual(r["child_write_at_end"], "4")
                child_reports = [v for v in violations(err) if " pwrite64 " in v]
                self.assertEqual(len(child_reports), 1, err)

    def test_io_uring_setup_is_refused_with_one_line_in_a_guarded_process(self):
        r, err = self.probe("io_uring")
        self.assertEqual(r["io_uring_setup"], str(-38))  # -ENOSYS: liburing falls back
        self.assertEqual(len(re.findall(r"^appendguard: io_uring_setup refused", err, re.M)), 1, err)
        r, err = self.probe("io_uring", APPENDGUARD_IO_URING="allow")
        self.assertNotEqual(r["io_uring_setup"], str(-38))
        if r["io_uring_setup"] == "0":  # allowed by this kernel: said once
            self.assertEqual(len(re.findall(r"^appendguard: an io_uring .* not seen", err, re.M)), 1, err)

    def test_the_layer_is_armed_in_a_new_thread_and_after_exec(self):
        # A thread that opened no guarded file traps with `always` only (the auto case is below).
        r, _ = self.probe("thread", APPENDGUARD_SYSCALLS="always")
        self.assertEqual(r["thread_pwrite64_at_0"], str(-95))
        r, _ = self.probe("exec")
        self.assertEqual(r["exec_pwrite64_at_0"], str(-95))

    def test_auto_traps_only_the_threads_that_opened_or_created_a_guarded_file(self):
        # The main thread holds witness.safetensors open; a thread that opened nothing is not trapped:
        # its raw write at 0 lands (docs/limits.md), where `always` refuses it (the test above).
        r, err = self.probe("thread", APPENDGUARD_TRACE="1")
        self.assertEqual(r["thread_pwrite64_at_0"], "4")
        self.assertEqual(violations(err), [])
        self.assertEqual(read_bytes(os.path.join(self.dir, "witness.safetensors")), b"0000")
        # A worker that opens a guarded file itself, and one that opens a second description of the main
        # thread's file, are trapped: their raw writes at 0 are refused with a report each; a third that
        # opened nothing is not (its raw write at 0 lands, its raw rename is not seen).
        r, err = self.probe("thread_opens", APPENDGUARD_TRACE="1")
        self.assertEqual(r["own_pwrite64_at_0"], str(-95))
        self.assertEqual(r["second_pwrite64_at_0"], str(-95))
        self.assertEqual(len([v for v in violations(err) if " pwrite64 " in v]), 2, err)
        self.assertEqual(read_bytes(os.path.join(self.dir, "worker.safetensors")), b"abcd")
        self.assertEqual(r["nothing_pwrite64_at_0"], "4")
        self.assertEqual(r["nothing_renameat"], "0")
        self.assertNotRegex(err, r"nothing.safetensors .*\(raw system call\)")
        self.assertEqual(read_bytes(os.path.join(self.dir, "witness.safetensors")), b"2222")

    def test_a_trapped_thread_stops_trapping_once_no_guarded_file_is_left(self):
        # Traced raw renames show which calls were trapped. A worker opens a guarded file (trapped), the
        # main thread closes it: the worker's next raw call is still trapped (it sets its own selector back
        # at that trap; no thread writes another's), the one after is not. A thread that closes the last
        # file itself stops at once.
        r, err = self.probe("release", APPENDGUARD_TRACE="1")
        for name in ("while_open", "first_after_close", "second_after_close", "after_own_close"):
            self.assertEqual(r[name], "0", name)
        def traced(name):
            return re.search(rf"trace: .* renameat fd=-1 \S+/{name}.safetensors.tmp .*\(raw system call\) -> 0",
                             err) is not None
        self.assertEqual([traced(n) for n in ("while_open", "first_after_close", "second_after_close",
                                                "after_own_close")], [True, True, False, False], err)

    def test_auto_traps_the_thread_that_created_a_file_with_o_excl_not_the_others(self):
        # safetensors 0.8's temporary file: its creating thread's raw rename onto a guarded name is seen
        # (traced) while the file is open; the main thread's raw rename meanwhile is not.
        r, err = self.probe("exclusive", APPENDGUARD_TRACE="1",
                            APPENDGUARD_PATHS=os.path.join(self.dir, "*.safetensors"))
        self.assertEqual((r["worker_renameat"], r["main_renameat"]), ("0", "0"))
        self.assertRegex(err, r"trace: .* renameat fd=-1 \S+/exclusive.safetensors.tmp .*\(raw system call\) -> 0")
        self.assertNotRegex(err, r"main.safetensors.tmp .*\(raw system call\)")

    def test_auto_arms_a_thread_only_while_it_holds_a_guarded_file(self):
        # While a thread's dispatch is ON the kernel takes every one of its system calls through its slow
        # entry path, selector ALLOW or not: auto arms a thread only while its selector is BLOCK. Read by a
        # tracer (PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG, Linux 6.4+) at each stage of a fresh process
        # whose main thread opens, then closes, a guarded file; its worker opens nothing.
        if tuple(int(n) for n in os.uname().release.split("-")[0].split(".")[:2]) < (6, 4):
            self.skipTest("PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG needs Linux 6.4+")
        # Then the worker opens a guarded file (armed), the main thread closes it (the worker stays armed
        # until its next trap), the worker makes a raw call: its SIGSYS handler releases and disarms it.
        stages = ("start", "open", "closed", "worker_open", "main_closed", "worker_trapped")
        r, _ = self.probe("dispatch_state")
        self.assertEqual(r["target_status"], "0")
        self.assertEqual({s: (r[s + "_main"], r[s + "_worker"]) for s in stages},
                         {"start": ("off", "off"), "open": ("on", "off"), "closed": ("off", "off"),
                          "worker_open": ("off", "on"), "main_closed": ("off", "on"),
                          "worker_trapped": ("off", "off")}, r)
        r, _ = self.probe("dispatch_state", APPENDGUARD_SYSCALLS="always")
        self.assertEqual(r["target_status"], "0")
        self.assertEqual({r[s + "_" + t] for s in stages for t in ("main", "worker")}, {"on"}, r)
        r, _ = self.probe("dispatch_state", APPENDGUARD_SYSCALLS="off")
        self.assertEqual([r[k] for k in ("start_main", "open_main")], ["off", "off"], r)

    def test_a_raw_fork_child_of_a_trapped_thread_is_trapped(self):
        # The child's copy of the forking thread's selector, at the same address, is re-armed: its raw write
        # at 0 on the inherited guarded descriptor is refused (the child exits 0 only then).
        r, err = self.probe("thread_fork")
        self.assertEqual(r["child_status"], "0", err)
        self.assertEqual(len([v for v in violations(err) if " pwrite64 " in v]), 1, err)

    def test_the_programs_own_sigsys_handler_and_a_blocked_sigsys(self):
        r, _ = self.probe("sigsys")
        self.assertEqual(r["own_after_raise"], "1")  # its own raise(SIGSYS) reached its handler
        self.assertEqual(r["sigaction_reports_own"], "1")
        self.assertEqual(r["pwrite64_at_0"], str(-95))  # and dispatch still reaches ours
        self.assertEqual(r["blocked_pwrite64_at_0"], str(-95))  # all signals blocked through libc
        self.assertEqual(r["raw_blocked_pwrite64_at_0"], str(-95))  # and by a raw rt_sigprocmask
        self.assertEqual(r["raw_mask_has_sigint"], "1")  # the raw mask was applied

    def test_doctor_says_whether_the_layer_is_active(self):
        launcher = os.environ.get("APPENDGUARD_LAUNCHER", "")
        self.assertTrue(launcher, "APPENDGUARD_LAUNCHER is not set; run through ctest")
        for setting, expected in (("auto", "raw syscalls:   covered in the threads that open or create guarded files, "
                                           "while one is open"),
                                  ("always", "raw syscalls:   covered from start-up"),
                                  ("off", "raw syscalls:   not covered (APPENDGUARD_SYSCALLS=off)")):
            env = child_env(mode=None, preload=False, APPENDGUARD_SYSCALLS=setting)
            proc = subprocess.run([launcher, "doctor"], env=env, capture_output=True, text=True, timeout=120)
            self.assertIn(expected, proc.stdout, proc.stdout + proc.stderr)

    def test_bad_value_is_one_line_and_status_2(self):
        proc = run([program("raw_syscalls"), "pwrite", self.dir], APPENDGUARD_SYSCALLS="sometimes")
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stderr.strip(),
                         "appendguard: invalid APPENDGUARD_SYSCALLS='sometimes': accepted: auto, always, off")

    def test_safetensors_save_file_raw_renameat_is_traced(self):
        if not CLIENT_PYTHON or subprocess.run([CLIENT_PYTHON, "-c", "import safetensors, torch"],
                                               capture_output=True).returncode != 0:
            if os.environ.get("APPENDGUARD_REQUIRE_REAL_CLIENTS") == "1":
                self.fail(f"APPENDGUARD_CLIENT_PYTHON={CLIENT_PYTHON!r} cannot import safetensors and torch")
            self.skipTest("APPENDGUARD_CLIENT_PYTHON with safetensors is not set")
        target = os.path.join(self.dir, "model.safetensors")
        code = ("import sys, torch, safetensors, safetensors.torch as st\n"
                "st.save_file({'w': torch.arange(6.0)}, sys.argv[1])\n"
                "print('version=' + safetensors.__version__)\n")
        proc = run([CLIENT_PYTHON, "-c", code, target], APPENDGUARD_TRACE="1", APPENDGUARD_BACKTRACE="0",
                   APPENDGUARD_PATHS=os.path.join(self.dir, "**"))
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        if results(proc.stdout)["version"].startswith("0.8"):  # 0.8 publishes with rustix's raw renameat
            self.assertRegex(proc.stderr, r"trace: .* rename\w* fd=-1 \S+/\.tmp\w+ time=\S+ to \S+/model.safetensors "
                                          r"flags=0 \(raw system call\) -> 0")


if __name__ == "__main__":
    unittest.main()
