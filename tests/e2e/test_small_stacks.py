"""The library's store paths on a thread of 16 KiB, the smallest stack a thread can have (PTHREAD_STACK_MIN):
a file written, closed and renamed, as a checkpoint is saved, on each appendonlyfs profile. On the stores
without rename (s3, volumes) the library carries the rename out by copying the file; that path's notices
and copy kept 20 KiB and more in the thread's frames, and the thread died of SIGSEGV. Each case checks the
program's exit, what each call returned, and the bytes in the backing directory. Exits 77 (skip) without
FUSE, unless APPENDGUARD_REQUIRE_FUSE=1 (CI), which makes it a failure.
"""
import os

import e2e_support
from e2e_support import e2e_program, harness, main, read_bytes, results

PROGRAM = e2e_program("e2e_small_stack_store")
STACK = 16384


class SmallStackSave(e2e_support.MountTest):
    def save(self, profile, mode):
        backing, mnt = self.mount(profile)
        proc = harness.run([PROGRAM, mnt, "model.safetensors", str(STACK), mode], APPENDGUARD_BACKTRACE="0")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        r = results(proc.stdout)
        calls = ("write", "close") if mode == "unrenamed" else ("write", "close", "rename")
        self.assertEqual([r.get(call) for call in calls], ["16", "0", "0"][:len(calls)], proc.stdout + proc.stderr)
        self.assertEqual(read_bytes(os.path.join(backing, "model.safetensors")), b"0123456789abcdef")
        self.assertFalse(os.path.exists(os.path.join(backing, "model.safetensors.tmp")))

    def test_closed_then_renamed(self):
        for profile in ("s3", "volumes", "hdfs", "strict"):
            with self.subTest(profile=profile):
                self.save(profile, "closed")

    def test_exclusive_renamed_while_open(self):
        for profile in ("s3", "volumes", "hdfs"):
            with self.subTest(profile=profile):
                self.save(profile, "exclusive")

    def test_exclusive_never_renamed(self):
        for profile in ("s3", "volumes", "hdfs"):
            with self.subTest(profile=profile):
                self.save(profile, "unrenamed")


class SmallStackLocalDisk(harness.TempDirTest):
    """The same saves on a local disk, traced (a rename's trace kept two 4 KiB paths in the thread's frame)
    and with APPENDGUARD_REOPEN=hold (a held session kept two 4 KiB sessions there): both died of SIGSEGV."""

    def save(self, mode, **variables):
        proc = harness.run([PROGRAM, self.dir, "model.safetensors", str(STACK), mode], APPENDGUARD_BACKTRACE="0",
                           **variables)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(read_bytes(os.path.join(self.dir, "model.safetensors")), b"0123456789abcdef")
        return proc

    def test_traced(self):
        for mode in ("closed", "exclusive", "unrenamed"):
            with self.subTest(mode=mode):
                proc = self.save(mode, APPENDGUARD_TRACE="1")
                if mode != "unrenamed":
                    self.assertIn("appendguard: trace:", proc.stderr)
                os.unlink(os.path.join(self.dir, "model.safetensors"))

    def test_held(self):
        for mode in ("closed", "exclusive", "unrenamed"):
            with self.subTest(mode=mode):
                self.save(mode, APPENDGUARD_REOPEN="hold")
                os.unlink(os.path.join(self.dir, "model.safetensors"))


if __name__ == "__main__":
    main()
