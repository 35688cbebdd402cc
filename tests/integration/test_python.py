"""Python programs under the library: the PyTorch DCP consolidation pattern and the io module's views."""
import glob
import os
import unittest

from harness import PYTHON, TempDirTest, read_bytes, results, run, script, violations


class PythonTest(TempDirTest):
    def case(self, name, path, **env):
        proc = run([PYTHON, script("python_cases.py"), name, path], **env)
        self.assertOk(proc)
        return results(proc.stdout), proc.stderr

    def test_dcp_consolidation_produces_the_same_bytes_as_without_library(self):
        guarded, plain = self.path("guarded"), self.path("plain")
        proc = run([PYTHON, script("dcp_consolidate.py"), guarded, "--files", "4", "--tensors", "6"])
        self.assertOk(proc)
        self.assertEqual(violations(proc.stderr), [])
        proc = run([PYTHON, script("dcp_consolidate.py"), plain, "--files", "4", "--tensors", "6"],
                   mode=None, preload=False)
        self.assertOk(proc)
        names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(plain, "*")))
        self.assertEqual(len(names), 5)
        for name in names:
            self.assertEqual(read_bytes(os.path.join(guarded, name)), read_bytes(os.path.join(plain, name)), name)

    def test_read_write_handle_reads_fail_and_later_writes_are_refused(self):
        """The third adversarial round: a program whose read failed (the handle made write-only) may write
        from what it could not read (Python's zipfile in mode "a" appends a second archive to the file), so
        the writes after a failed read are refused too, even an append: the file keeps its bytes."""
        path = self.path("r.safetensors")
        r, err = self.case("readable", path)
        self.assertEqual(r["readable"], "True")  # Python cannot know; the kernel answers reads with EBADF
        self.assertEqual(r["read"], "-1 errno=EBADF")
        self.assertEqual(r["tell"], "10")
        self.assertEqual(r["write_end"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(read_bytes(path), b"a" * 10)
        self.assertEqual(len(violations(err)), 2, err)
        self.assertIn("a read of this descriptor failed", err)

    def test_a_read_write_handle_that_is_not_read_appends(self):
        path = self.path("w.safetensors")
        r, err = self.case("appends_unread", path)
        self.assertEqual(r["write_end"], "5")
        self.assertEqual(read_bytes(path), b"a" * 10 + b"b" * 5)
        self.assertEqual(violations(err), [])

    def test_seek_back_and_write_is_refused_not_silently_appended(self):
        path = self.path("s.safetensors")
        r, err = self.case("seek_back", path)
        self.assertEqual(r["write_back"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["write_end"], "5")
        self.assertEqual(read_bytes(path), b"a" * 100 + b"c" * 5)
        self.assertIn("python stack (most recent call first):", err)
        self.assertIn("python_cases.py", err)
        self.assertIn("in case_seek_back", err)

    def test_os_module_calls(self):
        path = self.path("o.safetensors")
        r, err = self.case("os_level", path)
        self.assertEqual(r["write"], "10")
        self.assertEqual(r["pwrite_back"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["pwrite_end"], "1")
        self.assertEqual(r["dup_tell"], "10")
        self.assertEqual(r["ftruncate"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(read_bytes(path), b"x" * 10 + b"y")

    def test_shutil_copy_into_guarded_file(self):
        path = self.path("c.safetensors")
        r, err = self.case("copy", path)
        self.assertEqual(r["same"], "True")
        self.assertEqual(violations(err), [])

    def test_random_offset_writer_is_refused(self):
        path = self.path("random.safetensors")
        proc = run([PYTHON, script("random_writer.py"), path])
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("[Errno 95] Operation not supported", proc.stderr)
        self.assertIn("offset=3072 end_of_file=4096: refused (EOPNOTSUPP)", violations(proc.stderr)[0])
        self.assertEqual(read_bytes(path), b"\0" * 4096)


if __name__ == "__main__":
    unittest.main()
