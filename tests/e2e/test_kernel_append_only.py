"""Kernel append-only files (chattr +a, FS_APPEND_FL) on a tmpfs that the test mounts under the e2e
temporary directory: a store nobody here wrote. Once the header is written and the attribute set, the
kernel refuses every open for writing without O_APPEND (EPERM), so "r+b" fails without the library; with
APPENDGUARD=1 the DCP pattern, C stdio and C++ streams succeed, byte for byte what they write on a normal
file. The danger of such files: a pwrite() on an O_APPEND descriptor is silently appended by Linux; the
library refuses it and the file stays correct.

Needs root (mount -t tmpfs, CAP_LINUX_IMMUTABLE for chattr +a), chattr and lsattr (e2fsprogs) and a kernel
whose tmpfs supports the attribute (Linux 6.0+). Without them it exits 77 (skip), unless
APPENDGUARD_REQUIRE_FUSE=1 (CI: nothing may skip), which turns a missing prerequisite into a failure.
"""
import os
import sys
import unittest

from e2e_support import (PYTHON, check_library_is_effective, e2e_program, e2e_script, files_of, harness, read_bytes,
                         results, violations)
from tmpfs_append_only import chattr, is_append_only, missing_prerequisite, tmpfs_mounted

STDIO = e2e_program("e2e_stdio_append")
STREAM = e2e_program("e2e_stream_append")
DCP_PHASES = e2e_script("dcp_phases.py")
APPEND_PWRITE = e2e_script("append_pwrite.py")
DCP_ARGS = ["--files", "3", "--tensors", "4", "--tensor-bytes", "16384", "--workers", "3"]
COUNT, SIZE = "4", "5000"
HEADER = b"H" * 64
EXPECTED = HEADER + b"".join(bytes([ord("0") + i]) * 5000 for i in range(4))
SKIP_RETURN_CODE = 77


class KernelAppendOnlyTest(harness.TempDirTest):
    def setUp(self):
        super().setUp()
        self.tmpfs = self.path("tmpfs")
        os.mkdir(self.tmpfs)
        self.addCleanup(self.assert_unmounted)  # cleanups run last-in first-out: after the unmount
        self.enterContext(tmpfs_mounted(self.tmpfs))

    def assert_unmounted(self):
        self.assertFalse(os.path.ismount(self.tmpfs), "the tmpfs was left mounted")

    def t(self, name):
        return os.path.join(self.tmpfs, name)

    def make_append_only(self, path, data=None):
        if data is not None:
            with open(path, "wb") as f:
                f.write(data)
        code, out = chattr("+a", path)
        if code != 0:
            self.fail(f"chattr +a {path} failed on tmpfs ({out}); this kernel's tmpfs lacks FS_APPEND_FL")
        self.assertTrue(is_append_only(path))

    # ------------------------------------------------------------------ DCP consolidation pattern

    def dcp_headers(self, directory):
        proc = harness.run([PYTHON, DCP_PHASES, "headers", directory, *DCP_ARGS], mode=None, preload=False)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        written = files_of(directory)
        self.assertEqual(len(written), 3)
        for name in written:
            self.make_append_only(os.path.join(directory, name))
        return written

    def dcp_reference(self):
        local = self.path("local")
        proc = harness.run([PYTHON, harness.script("dcp_consolidate.py"), local, *DCP_ARGS], mode=None, preload=False)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return files_of(local)

    def test_dcp_pattern_with_library_is_byte_identical_to_a_normal_file(self):
        out = self.t("out")
        self.dcp_headers(out)
        proc = harness.run([PYTHON, DCP_PHASES, "append", out, *DCP_ARGS])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(violations(proc.stderr), [])
        self.assertNotIn("appendguard:", proc.stderr)
        written = files_of(out)
        expected = self.dcp_reference()
        self.assertEqual(sorted(written), sorted(expected))
        for name in expected:
            self.assertTrue(written[name] == expected[name], f"{name}: different bytes")
        for name in written:
            if name.endswith(".safetensors"):
                self.assertTrue(is_append_only(os.path.join(out, name)), name)

    def test_dcp_pattern_without_library_fails_eperm(self):
        out = self.t("out")
        headers = self.dcp_headers(out)
        proc = harness.run([PYTHON, DCP_PHASES, "append", out, *DCP_ARGS], mode=None, preload=False)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("dcp_phases: [Errno 1] Operation not permitted", proc.stderr)
        self.assertEqual(files_of(out), headers)  # the "r+b" open failed: nothing was written

    def test_rewrite_reopen_fails_eperm_and_says_why(self):
        # APPENDGUARD_REOPEN=rewrite reopens the file O_WRONLY|O_TRUNC to write it anew, which an
        # append-only file refuses: the program gets EPERM and the library says why, once per open.
        out = self.t("out")
        headers = self.dcp_headers(out)
        proc = harness.run([PYTHON, DCP_PHASES, "append", out, *DCP_ARGS], APPENDGUARD_REOPEN="rewrite")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("dcp_phases: [Errno 1] Operation not permitted", proc.stderr)
        self.assertEqual(files_of(out), headers)
        notices = [line for line in proc.stderr.splitlines() if line.startswith("appendguard")]
        self.assertTrue(notices, proc.stderr)
        self.assertEqual(len(notices), len({line.split('"')[1] for line in notices}), "one notice per reopen")
        for line in notices:
            self.assertIn("APPENDGUARD_REOPEN=rewrite reopens an existing file truncating it (O_WRONLY|O_TRUNC", line)
            self.assertIn("refused that with EPERM; the file is unchanged", line)
            self.assertIn("needs APPENDGUARD_REOPEN=append (the default)", line)

    # ------------------------------------------------------------------ C stdio and C++ streams

    def local(self, program):
        path = self.path("local.safetensors")
        proc = harness.run([program, path, COUNT, SIZE], mode=None, preload=False)
        self.assertEqual(proc.returncode, 0, proc.stdout)
        data = read_bytes(path)
        self.assertEqual(data, EXPECTED)
        return data

    def with_library(self, program):
        path = self.t("s.safetensors")
        self.make_append_only(path, HEADER)
        proc = harness.run([program, path, COUNT, SIZE, "existing"])
        self.assertEqual(proc.returncode, 0, f"{proc.stdout}\n{proc.stderr}")
        self.assertEqual(violations(proc.stderr), [])
        self.assertEqual(read_bytes(path), self.local(program))
        return results(proc.stdout)

    def test_stdio_fopen_rplus_fseek_end_fwrite_with_library(self):
        r = self.with_library(STDIO)
        self.assertEqual(r["ftell"], "64")
        self.assertEqual(r["ftell_after"], str(len(EXPECTED)))

    def test_cpp_fstream_seekp_end_write_with_library(self):
        r = self.with_library(STREAM)
        self.assertEqual(r["tellp"], "64")
        self.assertEqual(r["tellp_after"], str(len(EXPECTED)))

    def test_stdio_without_library_fopen_rplus_fails_eperm(self):
        path = self.t("s.safetensors")
        self.make_append_only(path, HEADER)
        proc = harness.run([STDIO, path, COUNT, SIZE, "existing"], mode=None, preload=False)
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertEqual(results(proc.stdout)["fopen_rplus"], "NULL errno=1")  # EPERM
        self.assertEqual(read_bytes(path), HEADER)

    def test_cpp_fstream_without_library_does_not_open(self):
        path = self.t("s.safetensors")
        self.make_append_only(path, HEADER)
        proc = harness.run([STREAM, path, COUNT, SIZE, "existing"], mode=None, preload=False)
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertEqual(results(proc.stdout)["is_open"], "0")
        self.assertEqual(read_bytes(path), HEADER)

    # ------------------------------------------------------------------ a pwrite the kernel would misplace

    def test_pwrite_at_zero_on_o_append_is_silently_appended_without_library(self):
        path = self.t("p.safetensors")
        self.make_append_only(path, HEADER)
        proc = harness.run([PYTHON, APPEND_PWRITE, path], mode=None, preload=False)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(results(proc.stdout)["pwrite"], "16")  # "success" ...
        self.assertEqual(read_bytes(path), HEADER + b"X" * 16)  # ... at the end, not at 0: corrupt

    def test_pwrite_at_zero_on_o_append_appends_with_library_as_without(self):
        # Issue 24, item 8: the program asked for O_APPEND, and the kernel appends every write of it,
        # pwrite's included (man 2 pwrite, BUGS): the end of file is where it lands, so it is allowed, as
        # without the library (it was refused before).
        path = self.t("p.safetensors")
        self.make_append_only(path, HEADER)
        proc = harness.run([PYTHON, APPEND_PWRITE, path])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(results(proc.stdout)["pwrite"], "16")
        self.assertEqual(violations(proc.stderr), [])
        self.assertEqual(read_bytes(path), HEADER + b"X" * 16)

    # ------------------------------------------------------------------ a file guarded by nothing but +a

    def test_unguarded_append_only_file_rplus_append_works_and_overwrite_is_said(self):
        # Issue 23: "f.bin" matches no pattern and tmpfs is not a store: the kernel's EPERM used to reach the
        # program unexplained. An "r+b" open that only appends is opened again with O_APPEND and works; a
        # "wb" overwrite, which nothing can carry out on such a file, fails with one appendguard: line.
        path = self.t("f.bin")
        self.make_append_only(path, b"0123456789")
        code = ("import sys\n"
                "p = sys.argv[1]\n"
                "with open(p, 'r+b') as f:\n"
                "    f.seek(0, 2); f.write(b'abc')\n"
                "try:\n"
                "    open(p, 'wb').close()\n"
                "    print('overwrite=ok')\n"
                "except OSError as e:\n"
                "    print('overwrite=' + str(e.errno))\n")
        proc = harness.run([PYTHON, "-c", code, path])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(read_bytes(path), b"0123456789abc")
        self.assertIn("overwrite=1", proc.stdout)  # EPERM
        lines = [line for line in proc.stderr.splitlines() if line.startswith("appendguard:")]
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn(path, lines[0])
        self.assertIn("append-only attribute (chattr +a)", lines[0])
        self.assertIn("O_TRUNC", lines[0])
        self.assertEqual(violations(proc.stderr), [])

    def test_unguarded_append_only_file_through_fopen(self):
        # Issue 23: std::ofstream (torch.save) and C programs open through fopen, which the library left alone
        # when the name matched no pattern: the kernel's EPERM came back without a word.
        path = self.t("g.bin")
        self.make_append_only(path, b"0123456789")
        code = ("import ctypes, ctypes.util, os, sys\n"
                "libc = ctypes.CDLL(None, use_errno=True)\n"
                "libc.fopen.restype = ctypes.c_void_p\n"
                "libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]\n"
                "for a in ('fwrite', 'fseek', 'fclose'): getattr(libc, a).argtypes = None\n"
                "p = sys.argv[1].encode()\n"
                "f = libc.fopen(p, b'r+')\n"
                "print('rplus=' + ('ok' if f else str(ctypes.get_errno())))\n"
                "if f:\n"
                "    libc.fseek(ctypes.c_void_p(f), ctypes.c_long(0), 2)\n"
                "    libc.fwrite(b'abc', ctypes.c_size_t(1), ctypes.c_size_t(3), ctypes.c_void_p(f))\n"
                "    print('close=%d' % libc.fclose(ctypes.c_void_p(f)))\n"
                "f = libc.fopen(p, b'w')\n"
                "print('w=' + ('ok' if f else str(ctypes.get_errno())))\n")
        proc = harness.run([PYTHON, "-c", code, path])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(proc.stdout.split(), ["rplus=ok", "close=0", "w=1"], proc.stderr)
        self.assertEqual(read_bytes(path), b"0123456789abc")
        lines = [line for line in proc.stderr.splitlines() if line.startswith("appendguard:")]
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn("append-only attribute (chattr +a)", lines[0])

    def test_guarded_name_on_append_only_file_truncating_open_is_said(self):
        # Issue 23: a *.safetensors file (guarded by name, on a tmpfs) with the attribute: save_file again, a
        # second dcp.save, open "wb" fail EPERM at their truncating open, which used to be passed on quietly.
        path = self.t("m.safetensors")
        self.make_append_only(path, b"0123456789")
        code = ("import sys\n"
                "try:\n"
                "    open(sys.argv[1], 'wb').write(b'new')\n"
                "    print('overwrite=ok')\n"
                "except OSError as e:\n"
                "    print('overwrite=%d' % e.errno)\n")
        proc = harness.run([PYTHON, "-c", code, path])
        self.assertEqual(proc.stdout.split(), ["overwrite=1"], proc.stderr)
        self.assertEqual(read_bytes(path), b"0123456789")
        lines = [line for line in proc.stderr.splitlines() if line.startswith("appendguard:")]
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn(f'("{path}", O_WRONLY|O_CREAT|O_TRUNC', lines[0])
        self.assertIn("append-only attribute (chattr +a)", lines[0])


def main():
    why = missing_prerequisite()
    if why:
        if os.environ.get("APPENDGUARD_REQUIRE_FUSE") == "1":
            print(f"FAIL: {why} and APPENDGUARD_REQUIRE_FUSE=1: kernel append-only tests", file=sys.stderr)
            sys.exit(1)
        print(f"SKIP: {why}: skipping kernel append-only tests")
        sys.exit(SKIP_RETURN_CODE)
    check_library_is_effective()
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
