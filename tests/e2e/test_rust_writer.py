"""A Rust program using only the standard library (tests/e2e/programs/tmp_then_rename.rs) doing
safetensors 0.8's five steps on a live hdfs-profile mount with only APPENDGUARD=1: the temporary file
is guarded by the mount rule, set_len's ftruncate is deferred, and the target holds the bytes written,
zero-filled to the preallocated size. Without the library set_len fails. Skips, saying so, where no
Rust compiler is installed."""
import os
import shutil
import subprocess
import sys

from harness import read_bytes
from e2e_support import MountTest, main

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "programs", "tmp_then_rename.rs")
RUSTC = shutil.which("rustc") or (os.path.expanduser("~/.cargo/bin/rustc")
                                  if os.path.exists(os.path.expanduser("~/.cargo/bin/rustc")) else None)


def expected(total, written):
    return bytes(i % 251 for i in range(written)) + b"\0" * (total - written)


class RustWriterTest(MountTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.binary = os.path.join(os.environ.get("APPENDGUARD_E2E_TMP", "/tmp"), f"tmp_then_rename-{os.getpid()}")
        subprocess.run([RUSTC, "-O", "-o", cls.binary, SOURCE], check=True, timeout=300)

    @classmethod
    def tearDownClass(cls):
        if os.path.exists(cls.binary):
            os.unlink(cls.binary)
        super().tearDownClass()

    def test_preallocated_then_written_fully_or_partly(self):
        self.mount("hdfs")
        for total, written in ((3 << 20, 3 << 20), (10000, 6000)):
            with self.subTest(total=total, written=written):
                directory = f"d{written}"
                os.mkdir(self.b(directory))
                proc = self.run_lib([self.binary, self.m(directory), str(total), str(written)])
                self.assertOk(proc)
                self.assertEqual(sorted(os.listdir(self.b(directory))), ["model.safetensors"])
                self.assertTrue(read_bytes(self.b(f"{directory}/model.safetensors")) == expected(total, written))
        self.assertNoMountRefusal()

    def test_without_library_set_len_fails(self):
        self.mount("hdfs")
        proc = self.run_plain([self.binary, self.m(""), "1000", "1000"])
        self.assertFails(proc)
        self.assertIn("set_len", proc.stderr)
        self.assertIn("Operation not supported", proc.stderr)


if __name__ == "__main__":
    if not RUSTC:
        print("SKIP: no Rust compiler (rustc) on this machine: the Rust standard-library writer is not tested")
        sys.exit(77)
    main()
