"""Programs that seek back and rewrite: with APPENDGUARD=1 the library refuses the write before the mount
sees it (the backing file stays an intact prefix, the mount logs nothing); without the library the mount
itself refuses (and logs it), or, for dd without seek= on hdfs, silently replaces the file. Python, the
C probe's `backward` case and `dd conv=notrunc` with and without seek=."""

from e2e_support import PYTHON, MountTest, e2e_script, harness, main, read_bytes, results, violations

REWRITE = e2e_script("rewrite.py")
A4096 = b"a" * 4096


class RewriteTest(MountTest):
    def assertLibraryRefused(self, stderr, offset, end, count=None):
        lines = violations(stderr)
        self.assertGreaterEqual(len(lines), 1, stderr)
        if count is not None:
            self.assertEqual(len(lines), count, stderr)
        for line in lines:
            self.assertIn(f"offset={offset} end_of_file={end}: refused (EOPNOTSUPP)", line)

    def assertMountRefused(self, profile, offset, size, end, errno_name, reason, count=None):
        refused = self.refused_writes()
        self.assertGreaterEqual(len(refused), 1, self.log_lines())
        if count is not None:
            self.assertEqual(len(refused), count, refused)
        pattern = (rf"refused write path=/\S+ offset={offset} size={size} end={end} errno={errno_name} "
                   rf"profile={profile} reason={reason}$")
        for line in refused:
            self.assertRegex(line, pattern)

    # ------------------------------------------------------------------ Python

    def python_with_library(self, profile, mode):
        self.mount(profile)
        path = self.m("w.safetensors")
        proc = self.run_lib([PYTHON, REWRITE, mode, path])
        self.assertFails(proc, 1)
        self.assertIn("rewrite: [Errno 95] Operation not supported", proc.stderr)
        self.assertLibraryRefused(proc.stderr, 1024, 4096)
        for line in violations(proc.stderr):
            self.assertIn(f"write {path} fd=", line)
        self.assertEqual(read_bytes(self.b("w.safetensors")), A4096)
        self.assertNoMountRefusal()

    def test_python_reopen_hdfs_refused_by_library(self):
        self.python_with_library("hdfs", "reopen")

    def test_python_reopen_strict_refused_by_library(self):
        self.python_with_library("strict", "reopen")

    def test_python_new_file_hdfs_refused_by_library(self):
        self.python_with_library("hdfs", "new")

    def test_python_new_file_s3_refused_by_library(self):
        self.python_with_library("s3", "new")

    def test_python_new_file_strict_refused_by_library(self):
        self.python_with_library("strict", "new")

    def python_without_library(self, profile, mode, errno_text, errno_name, reason):
        self.mount(profile)
        proc = self.run_plain([PYTHON, REWRITE, mode, self.m("w.safetensors")])
        self.assertFails(proc, 1)
        self.assertIn(f"rewrite: {errno_text}", proc.stderr)
        self.assertEqual(read_bytes(self.b("w.safetensors")), A4096)
        self.assertMountRefused(profile, 1024, 512, 4096, errno_name, reason)

    def test_python_reopen_hdfs_refused_by_mount(self):
        self.python_without_library("hdfs", "reopen", "[Errno 95] Operation not supported", "EOPNOTSUPP",
                                    "read-handle")

    def test_python_reopen_strict_refused_by_mount(self):
        self.python_without_library("strict", "reopen", "[Errno 95] Operation not supported", "EOPNOTSUPP",
                                    "not-at-end")

    def test_python_new_file_s3_refused_by_mount(self):
        # mountpoint-s3 aborts the upload: EINVAL, and the handle is poisoned (a retry by close() is
        # refused as "poisoned", at the end of what the handle wrote).
        self.mount("s3")
        proc = self.run_plain([PYTHON, REWRITE, "new", self.m("w.safetensors")])
        self.assertFails(proc, 1)
        self.assertIn("rewrite: [Errno 22] Invalid argument", proc.stderr)
        self.assertEqual(read_bytes(self.b("w.safetensors")), A4096)
        refused = self.refused_writes()
        self.assertRegex(refused[0], r"offset=1024 size=512 end=4096 errno=EINVAL profile=s3 reason=out-of-order$")
        for line in refused[1:]:
            self.assertRegex(line, r"errno=EINVAL profile=s3 reason=poisoned$")

    # ------------------------------------------------------------------ C probe

    def probe_backward(self, profile, preload):
        self.mount(profile)
        path = self.m("p.safetensors")
        proc = self.run_lib([harness.program("probe"), "backward", path]) if preload else \
            self.run_plain([harness.program("probe"), "backward", path])
        self.assertOk(proc)
        return results(proc.stdout), proc.stderr, path

    def test_probe_backward_hdfs_refused_by_library(self):
        self.probe_backward_refused_by_library("hdfs")

    def test_probe_backward_strict_refused_by_library(self):
        self.probe_backward_refused_by_library("strict")

    def probe_backward_refused_by_library(self, profile):
        r, err, path = self.probe_backward(profile, True)
        self.assertEqual(r["seek"], "10")
        self.assertEqual(r["write_back"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["seek_end"], "100")
        self.assertEqual(r["write_end"], "5")
        lines = violations(err)
        self.assertEqual(len(lines), 1, err)
        self.assertIn(f"write {path} fd=", lines[0])
        self.assertIn("bytes=5 offset=10 end_of_file=100: refused (EOPNOTSUPP)", lines[0])
        self.assertEqual(read_bytes(self.b("p.safetensors")), b"a" * 100 + b"c" * 5)
        self.assertNoMountRefusal()

    def test_probe_backward_hdfs_refused_by_mount(self):
        # O_RDWR on an existing file is a read stream on fuse_dfs: both writes fail, nothing is stored.
        r, err, _ = self.probe_backward("hdfs", False)
        self.assertEqual(r["write_back"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["write_end"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(violations(err), [])
        self.assertEqual(read_bytes(self.b("p.safetensors")), b"a" * 100)
        refused = self.refused_writes()
        self.assertEqual(len(refused), 2, refused)
        self.assertRegex(refused[0], r"offset=10 size=5 end=100 errno=EOPNOTSUPP profile=hdfs reason=read-handle$")
        self.assertRegex(refused[1], r"offset=100 size=5 end=100 errno=EOPNOTSUPP profile=hdfs reason=read-handle$")

    def test_probe_backward_strict_refused_by_mount(self):
        r, err, _ = self.probe_backward("strict", False)
        self.assertEqual(r["write_back"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["write_end"], "5")
        self.assertEqual(violations(err), [])
        self.assertEqual(read_bytes(self.b("p.safetensors")), b"a" * 100 + b"c" * 5)
        self.assertMountRefused("strict", 10, 5, 100, "EOPNOTSUPP", "not-at-end", count=1)

    # ------------------------------------------------------------------ dd conv=notrunc
    # coreutils dd (9.1) opens of= with O_RDWR|O_CREAT when seek= is given (O_WRONLY only if that
    # fails), and with O_WRONLY|O_CREAT otherwise; conv=notrunc leaves out O_TRUNC either way. Without
    # seek= it writes at offset 0 of the existing file: a rewrite too.

    def dd(self, profile, preload, seek, **env):
        self.mount(profile)
        with open(self.m("d.safetensors"), "wb") as f:  # an existing 4 KiB file, written through the mount
            f.write(A4096)
        source = self.path("block")
        with open(source, "wb") as f:
            f.write(b"Z" * 512)
        argv = ["dd", f"if={source}", f"of={self.m('d.safetensors')}", "bs=512", "count=1", "conv=notrunc",
                "status=none"]
        if seek:
            argv.append(f"seek={seek}")
        return self.run_lib(argv, **env) if preload else self.run_plain(argv)

    def assertDdWriteFailed(self, proc, message):
        self.assertFails(proc, 1)
        self.assertRegex(proc.stderr, rf"dd: error writing '.*d\.safetensors': {message}")

    def dd_refused_by_library(self, profile, seek):
        proc = self.dd(profile, True, seek)
        self.assertDdWriteFailed(proc, "Operation not supported")
        self.assertLibraryRefused(proc.stderr, 512 * seek, 4096, count=1)
        self.assertEqual(read_bytes(self.b("d.safetensors")), A4096)
        self.assertNoMountRefusal()

    def test_dd_seek_hdfs_refused_by_library(self):
        self.dd_refused_by_library("hdfs", 2)

    def test_dd_seek_strict_refused_by_library(self):
        self.dd_refused_by_library("strict", 2)

    def test_dd_offset0_hdfs_refused_by_library(self):
        self.dd_refused_by_library("hdfs", 0)

    def test_dd_offset0_strict_refused_by_library(self):
        self.dd_refused_by_library("strict", 0)

    def test_dd_seek_hdfs_refused_by_mount(self):
        proc = self.dd("hdfs", False, 2)  # O_RDWR: a read stream on fuse_dfs
        self.assertDdWriteFailed(proc, "Operation not supported")
        self.assertEqual(read_bytes(self.b("d.safetensors")), A4096)
        self.assertMountRefused("hdfs", 1024, 512, 4096, "EOPNOTSUPP", "read-handle", count=1)

    def test_dd_seek_strict_refused_by_mount(self):
        proc = self.dd("strict", False, 2)
        self.assertDdWriteFailed(proc, "Operation not supported")
        self.assertEqual(read_bytes(self.b("d.safetensors")), A4096)
        self.assertMountRefused("strict", 1024, 512, 4096, "EOPNOTSUPP", "not-at-end", count=1)

    def test_dd_seek_s3_refused_by_mount(self):
        proc = self.dd("s3", False, 2)  # O_RDWR: a read handle on mountpoint-s3
        self.assertDdWriteFailed(proc, "Bad file descriptor")
        self.assertEqual(read_bytes(self.b("d.safetensors")), A4096)
        self.assertMountRefused("s3", 1024, 512, 4096, "EBADF", "read-handle", count=1)

    def test_dd_seek_s3_with_library_rewrites_and_refuses_the_seek(self):
        # By default the s3 profile is a write-once store: dd's O_RDWR open of a file another process
        # wrote is rewritten (truncated, its bytes written back), and the write at 1024 is refused by the
        # library before it reaches the mount; the file keeps its bytes.
        proc = self.dd("s3", True, 2)
        self.assertDdWriteFailed(proc, "Operation not supported")
        reports = violations(proc.stderr)
        self.assertEqual(len(reports), 1, proc.stderr)
        self.assertIn("bytes=512 offset=1024 end_of_file=4096: refused (EOPNOTSUPP)", reports[0])
        self.assertIn("rewritten to O_WRONLY|O_CREAT|O_TRUNC", proc.stderr)
        self.assertEqual(read_bytes(self.b("d.safetensors")), A4096)
        self.assertEqual(self.refused_writes(), [])

    def test_dd_seek_s3_with_library_forced_append_open_refused_by_mount(self):
        # APPENDGUARD_REOPEN=append turns both of dd's opens (O_RDWR, then O_WRONLY) into
        # O_WRONLY|O_APPEND, which mountpoint-s3 refuses on an existing object: dd cannot open the file,
        # which stays untouched.
        proc = self.dd("s3", True, 2, APPENDGUARD_REOPEN="append")
        self.assertFails(proc, 1)
        self.assertRegex(proc.stderr, r"dd: failed to open '.*d\.safetensors': Operation not permitted")
        self.assertEqual(violations(proc.stderr), [])
        self.assertEqual(read_bytes(self.b("d.safetensors")), A4096)
        opens = [line for line in self.log_lines() if line.startswith("refused open ")]
        self.assertEqual(len(opens), 2, self.log_lines())
        for line in opens:
            self.assertIn(" flags=O_WRONLY|O_APPEND errno=EPERM profile=s3 ", line)
        self.assertEqual(self.refused_writes(), [])

    def test_dd_offset0_hdfs_without_library_silently_replaces_the_file(self):
        # O_WRONLY without O_TRUNC replaces the file on fuse_dfs: the open empties it and the write at 0
        # is then an append. dd succeeds and the 4 KiB file is now 512 bytes: nothing is refused.
        proc = self.dd("hdfs", False, 0)
        self.assertOk(proc)
        self.assertEqual(read_bytes(self.b("d.safetensors")), b"Z" * 512)
        self.assertNoMountRefusal()

    def test_dd_offset0_strict_refused_by_mount(self):
        proc = self.dd("strict", False, 0)
        self.assertDdWriteFailed(proc, "Operation not supported")
        self.assertEqual(read_bytes(self.b("d.safetensors")), A4096)
        self.assertMountRefused("strict", 0, 512, 4096, "EOPNOTSUPP", "not-at-end", count=1)


if __name__ == "__main__":
    main()
