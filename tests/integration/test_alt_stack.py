"""A signal handler on a legal 4 KiB alternate stack (sigaltstack, above MINSIGSTKSZ) calling interposed
functions on a guarded file: no byte is written below that stack but by the write opens (tests/integration/programs/alt_stack_use.c
measures it with a pattern). The kernel's own signal frame takes most of such a stack (AT_MINSIGSTKSZ),
so a raw system call from that handler, whose trap is a second signal frame, cannot fit: not tested here
(docs/limits.md)."""
import os

from harness import TempDirTest, program, results, run

CALLS = ("write", "pwrite_end", "pwrite_at_0", "writev", "pwritev2", "sendfile", "copy_file_range", "lseek",
         "fstat", "fsync", "read", "mmap", "fcntl", "dup_close", "dup2_close", "close_range", "open_read",
         "rename", "renameat2", "syscall", "sigprocmask", "sigaction")
# Still deeper than a 4 KiB alternate stack leaves after the kernel's frame (3,336 B here): the opens'
# decision (about 1.4 KiB; 2.2 KiB with openat's or unlink's pattern match), the size changes (768-1,088 B)
# and dprintf (libc's own vfprintf does not fit either). Measured, not asserted (docs/limits.md).
OPENS = ("open_close", "open_truncate", "open_untracked", "openat_close", "creat_close", "fopen_fclose",
         "fdopen_fclose", "dprintf", "unlink", "ftruncate", "truncate", "fallocate", "posix_fallocate")


class AltStackTest(TempDirTest):
    def test_every_interposed_call_fits_a_4_kib_alternate_stack(self):
        for setting in ("auto", "always"):
            proc = run([program("alt_stack_use"), self.dir], APPENDGUARD_PATHS=os.path.join(self.dir, "**"),
                       APPENDGUARD_SYSCALLS=setting)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr[-3000:])
            r = results(proc.stdout)
            self.assertEqual(sorted(r), sorted(("none",) + CALLS + OPENS), proc.stdout)
            below = {name: r[name] for name in CALLS if r[name].split(",")[1] != "0"}
            self.assertEqual(below, {}, proc.stdout)
