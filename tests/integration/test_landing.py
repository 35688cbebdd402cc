"""Where writes land, on a local disk (issues 23 and 24): every case is run without the library (the
reference) and with APPENDGUARD=1, and the file must be byte for byte the reference's.

* Appends without a seek (`cat >> f` through bash, bash's own `printf >> f`, `dd oflag=append
  conv=notrunc`, os.open(O_APPEND) + write) with APPENDGUARD_REOPEN=rewrite and hold, where the library
  writes the existing file anew: before the fix the reopen left the kernel offset at 0 and the check looked
  only at where the program meant to write, so the bytes replaced the file's first bytes, exit 0.
* pwrite/pwritev/pwritev2 on the program's own O_APPEND descriptor and pwritev2(.., 0, RWF_APPEND): the
  kernel appends them; they were refused.
* An unaligned O_DIRECT write (EINVAL, the program's own error on a local disk) got a notice blaming a
  write-once store.
* The guarded O_RDWR descriptor (made write-only) as the input of copy_file_range, sendfile and splice
  fails EBADF: reported as a read of it is.
"""
import os
import shutil
import subprocess
import unittest

from harness import PYTHON, TempDirTest, child_env, read_bytes, results, run, script, violations

LANDING = script("landing.py")
OLD = b"0123456789" * 10
NEW = b"appended!"


def notices(stderr):
    return [line for line in stderr.splitlines() if line.startswith("appendguard:")]


class LandingTest(TempDirTest):
    def setUp(self):
        super().setUp()
        self.src = self.path("src.bin")
        with open(self.src, "wb") as f:
            f.write(NEW)

    def fresh(self, name):
        path = self.path(name)
        with open(path, "wb") as f:
            f.write(OLD)
        return path

    def commands(self, target):
        return {
            "bash_cat": ["bash", "-c", f'cat "{self.src}" >> "{target}"'],
            "bash_printf": ["bash", "-c", f'printf %s {NEW.decode()} >> "{target}"'],
            "dd_oflag_append": ["dd", f"if={self.src}", f"of={target}", "oflag=append", "conv=notrunc",
                                "status=none"],
            "python_os_open": [PYTHON, LANDING, "append_no_seek", target, NEW.decode()],
        }

    def reference(self, name):
        path = self.fresh("ref-" + name)
        proc = subprocess.run(self.commands(path)[name], env=child_env(None, False), capture_output=True, text=True)
        self.assertOk(proc)
        return read_bytes(path)

    def test_appends_without_a_seek_land_at_the_end_whatever_the_reopen(self):
        for reopen in ("rewrite", "hold", "append"):
            for name in self.commands("x"):
                with self.subTest(reopen=reopen, tool=name):
                    expected = self.reference(name)
                    self.assertEqual(expected, OLD + NEW)
                    target = self.fresh(f"{reopen}-{name}.safetensors")
                    proc = run(self.commands(target)[name], APPENDGUARD_REOPEN=reopen)
                    self.assertOk(proc)
                    self.assertEqual(violations(proc.stderr), [])
                    self.assertEqual(read_bytes(target), expected)

    def test_a_seek_away_then_a_write_on_the_programs_own_o_append_still_appends(self):
        # The descriptor written anew does not append: the library moves its offset to the end first.
        code = ("import os,sys; fd=os.open(sys.argv[1], os.O_WRONLY|os.O_APPEND); os.lseek(fd, 3, 0); "
                "os.write(fd, b'Z'); os.close(fd)")
        for reopen in ("rewrite", "hold"):
            with self.subTest(reopen=reopen):
                target = self.fresh(f"seek-{reopen}.safetensors")
                proc = run([PYTHON, "-c", code, target], APPENDGUARD_REOPEN=reopen)
                self.assertOk(proc)
                self.assertEqual(read_bytes(target), OLD + b"Z")

    def test_pwrite_on_the_programs_own_o_append_descriptor_appends_and_is_allowed(self):
        reference = self.fresh("ref.bin")
        plain = subprocess.run([PYTHON, LANDING, "pwrite_on_append", reference], env=child_env(None, False),
                               capture_output=True, text=True)
        self.assertOk(plain)
        self.assertEqual(read_bytes(reference), OLD + b"PQR")
        target = self.fresh("p.safetensors")
        proc = run([PYTHON, LANDING, "pwrite_on_append", target])
        self.assertOk(proc)
        self.assertEqual(results(proc.stdout), {"pwrite": "ok", "pwritev": "ok", "pwritev2": "ok"})
        self.assertEqual(violations(proc.stderr), [])
        self.assertEqual(read_bytes(target), OLD + b"PQR")

    def test_pwritev2_rwf_append_at_offset_0_appends_and_is_allowed(self):
        target = self.fresh("r.safetensors")
        proc = run([PYTHON, LANDING, "rwf_append", target])
        self.assertOk(proc)
        self.assertEqual(results(proc.stdout), {"pwritev2": "ok"})
        self.assertEqual(violations(proc.stderr), [])
        self.assertEqual(read_bytes(target), OLD + b"A")

    def test_unaligned_o_direct_write_on_a_local_disk_gets_no_store_notice(self):
        target = self.fresh("d.safetensors")
        proc = run([PYTHON, LANDING, "odirect_unaligned", target])
        self.assertOk(proc)
        self.assertEqual(results(proc.stdout), {"write": "EINVAL"})
        self.assertEqual(notices(proc.stderr), [], proc.stderr)
        self.assertEqual(read_bytes(target), OLD)

    def test_guarded_rdwr_descriptor_as_a_copy_input_is_reported_once(self):
        target = self.fresh("c.safetensors")
        proc = run([PYTHON, LANDING, "copy_from_rdwr", target, self.path("out.bin")])
        self.assertOk(proc)
        self.assertEqual(results(proc.stdout),
                         {"copy_file_range": "EBADF", "sendfile": "EBADF", "splice": "EBADF"})
        lines = violations(proc.stderr)
        self.assertEqual(len(lines), 1, proc.stderr)  # one per descriptor, as for reads
        self.assertIn("copy_file_range", lines[0])
        self.assertIn(target, lines[0])
        self.assertIn("appendguard made the handle write-only", proc.stderr)


if __name__ == "__main__":
    unittest.main()
