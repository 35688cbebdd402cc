"""C stdio and C++ streams on a live mount, with tests/e2e/programs/stdio_append.c
(fopen "r+b" + fseek(SEEK_END) + fwrite) and stream_append.cpp (std::fstream(in|out|binary) +
seekp(0, end) + write): with APPENDGUARD=1 the file must be what the program writes on a local disk.

glibc's fopen and libstdc++'s filebuf open the file inside libc, not through the interposable open: these
cases pass only because the library interposes the fopen family (docs/stdio.md).
"""
import re

from e2e_support import MountTest, e2e_program, main, read_bytes, results, violations

STDIO = e2e_program("e2e_stdio_append")
STREAM = e2e_program("e2e_stream_append")
COUNT, SIZE = "4", "5000"
EXPECTED = b"H" * 64 + b"".join(bytes([ord("0") + i]) * 5000 for i in range(4))


class StreamsTest(MountTest):
    def local(self, program):
        path = self.path("local.safetensors")
        self.assertOk(self.run_plain([program, path, COUNT, SIZE]))
        data = read_bytes(path)
        self.assertEqual(data, EXPECTED)  # the program itself is right
        return data

    def with_library(self, profile, program, **env):
        self.mount(profile)
        proc = self.run_lib([program, self.m("s.safetensors"), COUNT, SIZE], **env)
        self.assertOk(proc)
        self.assertEqual(violations(proc.stderr), [])
        self.assertEqual(read_bytes(self.b("s.safetensors")), self.local(program))
        self.assertNoMountRefusal()
        return results(proc.stdout)

    def test_hdfs_stdio_fopen_rplus_fseek_end_fwrite(self):
        r = self.with_library("hdfs", STDIO)
        self.assertEqual(r["ftell"], "64")
        self.assertEqual(r["ftell_after"], str(len(EXPECTED)))

    def test_hdfs_cpp_fstream_seekp_end_write(self):
        r = self.with_library("hdfs", STREAM)
        self.assertEqual(r["tellp"], "64")
        self.assertEqual(r["tellp_after"], str(len(EXPECTED)))

    def test_strict_stdio_fopen_rplus_fseek_end_fwrite(self):
        r = self.with_library("strict", STDIO)
        self.assertEqual(r["ftell"], "64")
        self.assertEqual(r["ftell_after"], str(len(EXPECTED)))

    def test_strict_cpp_fstream_seekp_end_write(self):
        r = self.with_library("strict", STREAM)
        self.assertEqual(r["tellp"], "64")
        self.assertEqual(r["tellp_after"], str(len(EXPECTED)))

    def test_s3_stdio_with_rewrite_reopen(self):
        r = self.with_library("s3", STDIO, APPENDGUARD_REOPEN="rewrite")
        self.assertEqual(r["ftell"], "64")
        self.assertEqual(r["ftell_after"], str(len(EXPECTED)))

    def test_s3_cpp_fstream_with_rewrite_reopen(self):
        r = self.with_library("s3", STREAM, APPENDGUARD_REOPEN="rewrite")
        self.assertEqual(r["tellp"], "64")
        self.assertEqual(r["tellp_after"], str(len(EXPECTED)))

    def without_library_hdfs(self, program):
        # The contrast: the "r+b" reopen is a read stream on hdfs, the appends fail EOPNOTSUPP at flush.
        self.mount("hdfs")
        proc = self.run_plain([program, self.m("s.safetensors"), COUNT, SIZE])
        self.assertFails(proc, 1)
        self.assertEqual(read_bytes(self.b("s.safetensors")), b"H" * 64)
        refused = self.refused_writes()
        self.assertGreaterEqual(len(refused), 1, self.log_lines())
        for line in refused:
            self.assertRegex(line, r" offset=64 size=\d+ end=64 errno=EOPNOTSUPP profile=hdfs reason=read-handle$")
        return proc.stdout

    def test_hdfs_stdio_without_library_refused_by_mount(self):
        proc_stdout = self.without_library_hdfs(STDIO)
        # 5000 bytes exceed the stream's buffer: the first fwrite goes straight to the mount and fails.
        self.assertEqual(re.findall(r"^fwrite=(\d+)$", proc_stdout, re.M)[0], "0")

    def test_hdfs_cpp_fstream_without_library_refused_by_mount(self):
        r = results(self.without_library_hdfs(STREAM))
        self.assertEqual(r["good_after_flush"], "0")


if __name__ == "__main__":
    main()
