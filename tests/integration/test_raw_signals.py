"""Signal masks, handlers and bad pointers under the raw-system-call layer (src/shim/hooks_signal.cpp,
syscall_dispatch.cpp): SIGSYS is never blocked where a trap can be raised, the masks a program reads back
are the ones it set, its own restorer works, and a bad pointer is EFAULT, as the kernel answers
(tests/integration/programs/raw_signals.c)."""
import os

from harness import TempDirTest, program, results, run
from test_raw_syscalls import layer_available

EFAULT = str(-14)
EOPNOTSUPP = str(-95)


class RawSignalsTest(TempDirTest):
    def setUp(self):
        super().setUp()
        if not layer_available():
            self.skipTest("Syscall User Dispatch needs Linux 5.11+")

    def probe(self, case, **variables):
        variables.setdefault("APPENDGUARD_PATHS", os.path.join(self.dir, "**"))
        variables.setdefault("APPENDGUARD_BACKTRACE", "0")
        variables.setdefault("APPENDGUARD_SYSCALLS", "always")
        proc = run([program("raw_signals"), case, self.dir], **variables)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr[-3000:])
        return results(proc.stdout)

    def test_a_handler_with_every_signal_in_its_mask_has_its_raw_calls_guarded(self):
        # Before: killed by SIGSYS (exit -31): the handler ran with SIGSYS blocked.
        r = self.probe("full_mask_handler")
        self.assertEqual(r["handler_pwrite64_at_0"], EOPNOTSUPP)
        self.assertEqual(r["old_mask_has_sigsys"], "1")  # read back as set

    def test_a_raw_rt_sigaction_with_the_programs_own_restorer(self):
        # Before: killed by SIGSYS (the handler's full mask), then SIGSEGV (a raw rt_sigreturn performed
        # from the SIGSYS handler's own frame).
        r = self.probe("raw_full_mask_handler")
        self.assertEqual(r["rt_sigaction"], "0")
        self.assertEqual(r["handler_pwrite64_at_0"], EOPNOTSUPP)
        self.assertEqual(r["after_own_restorer"], "42")
        self.assertEqual(r["mask_after_has_sigusr1"], "0")  # the interrupted mask came back
        self.assertEqual(r["old_mask_has_sigsys"], "1")

    def test_the_masks_read_back_are_the_ones_set(self):
        # Before: every read gave 0 (SIGSYS dropped from the set and from what was read back).
        r = self.probe("mask_readback")
        self.assertEqual([r[k] for k in ("libc_blocked", "raw_blocked", "libc_unblocked", "raw_set_blocked",
                                         "raw_set_unblocked")], ["1", "1", "0", "1", "0"], r)
        self.assertEqual(r["pwrite64_at_0"], EOPNOTSUPP)

    def test_bad_pointers_are_efault_as_the_kernel_answers(self):
        # Before: SIGSEGV in the library at the first one (exit -11, nothing printed).
        r = self.probe("bad_pointers")
        for key in ("rt_sigprocmask_set", "rt_sigprocmask_old", "rt_sigaction_act", "rt_sigaction_old", "clone3",
                    "rename", "rename_to", "open", "openat", "pwritev2", "writev", "unlink"):
            self.assertEqual(r.get(key), EFAULT, key)
