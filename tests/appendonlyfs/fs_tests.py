"""Mount tests of appendonlyfs: every profile rule and fault option, checked with real syscalls.

usage: fs_tests.py APPENDONLYFS_BINARY GROUP
GROUP is one of: cli, common, hdfs, s3, strict, volumes, faults. Exit 77 (skip) when FUSE is absent, unless
APPENDGUARD_REQUIRE_FUSE=1. Each test mounts a fresh filesystem over fresh temporary directories.
"""

import ctypes
import errno
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aofs  # noqa: E402

BINARY = None
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


def raw_fallocate(fd, offset, length):
    """The fallocate(2) syscall itself; os.posix_fallocate may fall back to glibc's emulation."""
    if LIBC.fallocate(fd, 0, offset, length) != 0:
        return ctypes.get_errno()
    return 0


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)


class MountTest(unittest.TestCase):
    profile = "hdfs"
    options = ()
    link_errors = ()  # what symlink(2) and link(2) fail with; empty: they work

    def setUp(self):
        self.log = tempfile.NamedTemporaryFile(prefix="aofs-log-", delete=False).name
        self.addCleanup(os.unlink, self.log)
        self.backing, self.mnt = self.enterContext(
            aofs.mounted(BINARY, profile=self.profile, options=self.options, log=self.log))

    def m(self, name):
        return os.path.join(self.mnt, name)

    def b(self, name):
        return os.path.join(self.backing, name)

    def open(self, name, flags, mode=0o644):
        fd = os.open(self.m(name), flags, mode)
        self.addCleanup(lambda: _close_quietly(fd))
        return fd

    def seed(self, name, data):
        """Creates a file directly in the backing directory (an object already in the store)."""
        write_file(self.b(name), data)

    def assert_errno(self, expected, function, *args):
        with self.assertRaises(OSError) as caught:
            function(*args)
        self.assertEqual(caught.exception.errno, expected,
                         f"expected {errno.errorcode[expected]}, got {caught.exception!r}")

    def log_lines(self):
        with open(self.log) as f:
            return [line.rstrip("\n") for line in f]

    def assert_logged(self, *fragments):
        lines = self.log_lines()
        for line in lines:
            if all(fragment in line for fragment in fragments):
                return line
        self.fail(f"no log line with {fragments}; log: {lines}")


def _close_quietly(fd):
    try:
        os.close(fd)
    except OSError:
        pass


class CommonTests:
    """Pass-through operations and the O_APPEND offset; mixed into one class per profile."""

    def test_reads_stat_and_directory_operations(self):
        self.seed("a.bin", b"0123456789")
        self.assertEqual(read_bytes(self.m("a.bin")), b"0123456789")
        fd = self.open("a.bin", os.O_RDONLY)
        self.assertEqual(os.pread(fd, 4, 3), b"3456")
        self.assertEqual(os.fstat(fd).st_size, 10)
        self.assertEqual(os.stat(self.m("a.bin")).st_size, 10)
        os.mkdir(self.m("d"))
        self.assertTrue(os.path.isdir(self.b("d")))
        self.assertEqual(sorted(os.listdir(self.mnt)), ["a.bin", "d"])
        os.rmdir(self.m("d"))
        self.assertFalse(os.path.exists(self.b("d")))
        os.chmod(self.m("a.bin"), 0o600)
        self.assertEqual(os.stat(self.b("a.bin")).st_mode & 0o777, 0o600)
        os.chown(self.m("a.bin"), 1234, 5678)
        self.assertEqual((os.stat(self.b("a.bin")).st_uid, os.stat(self.b("a.bin")).st_gid), (1234, 5678))
        os.utime(self.m("a.bin"), (1000000, 2000000))
        self.assertEqual(os.stat(self.b("a.bin")).st_mtime, 2000000)
        if self.link_errors:  # the store has no links: symlink and link refused, nothing created
            self.assert_errno(self.link_errors[0], os.symlink, "a.bin", self.m("link"))
            self.assert_errno(self.link_errors[1], os.link, self.m("a.bin"), self.m("hard"))
            self.assertEqual(sorted(os.listdir(self.backing)), ["a.bin"])
        else:
            os.symlink("a.bin", self.m("link"))
            self.assertEqual(os.readlink(self.m("link")), "a.bin")
            self.assertEqual(read_bytes(self.m("link")), b"0123456789")
            os.unlink(self.m("link"))
        self.assertGreater(os.statvfs(self.mnt).f_bsize, 0)
        os.unlink(self.m("a.bin"))
        self.assertEqual(os.listdir(self.backing), [])
        os.fsync(fd)

    def test_create_and_sequential_writes(self):
        fd = self.open("new.bin", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        self.assertEqual(os.write(fd, b"abc"), 3)
        self.assertEqual(os.write(fd, b"def"), 3)
        os.close(fd)
        self.assertEqual(read_bytes(self.b("new.bin")), b"abcdef")
        self.assertEqual(self.log_lines(), [])

    def test_o_append_write_lands_at_real_end_after_other_handle_appended(self):
        if self.profile in ("s3", "volumes"):  # no append to an existing object (s3: no second writer either)
            fd = self.open("log.txt", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            os.write(fd, b"start\n")
            os.write(fd, b"one\n")
            self.assertEqual(read_bytes(self.b("log.txt")), b"start\none\n")
            return
        self.seed("log.txt", b"start\n")
        first = self.open("log.txt", os.O_WRONLY | os.O_APPEND)
        second = self.open("log.txt", os.O_WRONLY | os.O_APPEND)
        os.write(first, b"one\n")
        os.write(second, b"two\n")
        os.write(first, b"three\n")
        # A handle opened by another process sees the size the kernel learned from the writes above.
        subprocess.run([sys.executable, "-c",
                        "import os,sys; fd=os.open(sys.argv[1], os.O_WRONLY|os.O_APPEND); os.write(fd, b'four\\n')",
                        self.m("log.txt")], check=True)
        os.write(second, b"five\n")
        self.assertEqual(read_bytes(self.b("log.txt")), b"start\none\ntwo\nthree\nfour\nfive\n")
        self.assertEqual(os.stat(self.m("log.txt")).st_size, len(b"start\none\ntwo\nthree\nfour\nfive\n"))
        self.assertEqual(self.log_lines(), [])

    def test_large_write_split_by_kernel_arrives_in_order(self):
        data = os.urandom(3 * 1024 * 1024 + 17)
        fd = self.open("big.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        view, done = memoryview(data), 0
        while done < len(data):
            done += os.write(fd, view[done:])
        os.close(fd)
        self.assertEqual(read_bytes(self.b("big.bin")), data)
        self.assertEqual(read_bytes(self.m("big.bin")), data)

    def test_eight_threads_append_eight_files(self):
        chunks = [bytes([65 + t]) * 4096 for t in range(8)]

        def writer(t):
            fd = os.open(self.m(f"f{t}.bin"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                for i in range(64):
                    os.write(fd, chunks[t][: 1000 + i])
            finally:
                os.close(fd)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for t in range(8):
            expected = b"".join(chunks[t][: 1000 + i] for i in range(64))
            self.assertEqual(read_bytes(self.b(f"f{t}.bin")), expected)
        self.assertEqual(self.log_lines(), [])


class HdfsCommon(CommonTests, MountTest):
    profile = "hdfs"


class S3Common(CommonTests, MountTest):
    profile = "s3"
    link_errors = (errno.EPERM, errno.EPERM)  # mountpoint-s3's fuse.rs: "Userspace expects EPERM for link/symlink"


class VolumesCommon(CommonTests, MountTest):
    profile = "volumes"
    # The profile answers ENOSYS to both (earth-mover/icechunk#2341); the kernel passes a FUSE daemon's
    # ENOSYS on to symlink(2) but turns it into EPERM for link(2).
    link_errors = (errno.ENOSYS, errno.EPERM)


class StrictCommon(CommonTests, MountTest):
    profile = "strict"


class HdfsTests(MountTest):
    profile = "hdfs"

    def test_rdwr_existing_is_read_stream_writes_fail_eopnotsupp(self):
        self.seed("a.safetensors", b"x" * 20)
        fd = self.open("a.safetensors", os.O_RDWR)
        self.assertEqual(os.read(fd, 5), b"xxxxx")
        os.lseek(fd, 0, os.SEEK_END)
        self.assert_errno(errno.EOPNOTSUPP, os.write, fd, b"y" * 10)
        self.assertEqual(read_bytes(self.b("a.safetensors")), b"x" * 20)
        line = self.assert_logged("refused write", "path=/a.safetensors", "errno=EOPNOTSUPP", "profile=hdfs")
        self.assertTrue(line.startswith("refused write path=/a.safetensors offset=20 size=10 end=20 errno=EOPNOTSUPP"),
                        line)

    def test_rdwr_trunc_existing_is_still_a_read_stream(self):
        self.seed("a", b"keep")
        fd = self.open("a", os.O_RDWR | os.O_TRUNC)
        self.assert_errno(errno.EOPNOTSUPP, os.write, fd, b"y")
        self.assertEqual(read_bytes(self.b("a")), b"keep")

    def test_rdwr_missing_creates_write_stream(self):
        fd = self.open("new", os.O_RDWR | os.O_CREAT)
        self.assertEqual(os.write(fd, b"hello"), 5)
        self.assertEqual(os.write(fd, b" world"), 6)
        self.assert_errno(errno.EOPNOTSUPP, os.pwrite, fd, b"H", 0)
        self.assertEqual(os.write(fd, b"!"), 1)  # the handle stays usable
        self.assertEqual(read_bytes(self.b("new")), b"hello world!")
        self.assert_logged("refused write path=/new offset=0 size=1 end=11 errno=EOPNOTSUPP profile=hdfs")

    def test_wronly_existing_replaces_file_without_o_trunc(self):
        self.seed("a", b"old contents")
        fd = self.open("a", os.O_WRONLY)
        self.assertEqual(os.stat(self.b("a")).st_size, 0)
        os.write(fd, b"new")
        os.close(fd)
        self.assertEqual(read_bytes(self.b("a")), b"new")
        self.assertEqual(read_bytes(self.m("a")), b"new")

    def test_wronly_trunc_existing_replaces_file(self):
        self.seed("a", b"old contents")
        fd = self.open("a", os.O_WRONLY | os.O_TRUNC)
        os.write(fd, b"new")
        os.close(fd)
        self.assertEqual(read_bytes(self.b("a")), b"new")

    def test_wronly_append_appends_and_pwrite_still_appends(self):
        self.seed("a", b"head")
        fd = self.open("a", os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"-tail")
        os.pwrite(fd, b"-more", 0)  # Linux: pwrite on O_APPEND appends
        self.assertEqual(read_bytes(self.b("a")), b"head-tail-more")

    def test_write_not_at_end_fails_and_handle_stays_usable(self):
        fd = self.open("a", os.O_WRONLY | os.O_CREAT)
        os.write(fd, b"0123456789")
        self.assert_errno(errno.EOPNOTSUPP, os.pwrite, fd, b"x", 5)
        self.assert_errno(errno.EOPNOTSUPP, os.pwrite, fd, b"x", 15)
        os.lseek(fd, 3, os.SEEK_SET)
        self.assert_errno(errno.EOPNOTSUPP, os.write, fd, b"x")
        self.assertEqual(os.pwrite(fd, b"ab", 10), 2)
        self.assertEqual(read_bytes(self.b("a")), b"0123456789ab")
        self.assert_logged("refused write path=/a offset=15 size=1 end=10 errno=EOPNOTSUPP profile=hdfs")

    def test_truncate_to_zero_empties_non_zero_fails(self):
        self.seed("a", b"0123456789")
        fd = self.open("a", os.O_WRONLY | os.O_APPEND)
        self.assert_errno(errno.EOPNOTSUPP, os.ftruncate, fd, 4)
        self.assert_errno(errno.EOPNOTSUPP, os.truncate, self.m("a"), 20)
        self.assertEqual(read_bytes(self.b("a")), b"0123456789")
        os.ftruncate(fd, 0)
        self.assertEqual(os.stat(self.b("a")).st_size, 0)
        os.write(fd, b"fresh")
        self.assertEqual(read_bytes(self.b("a")), b"fresh")
        os.truncate(self.m("a"), 0)
        self.assertEqual(os.stat(self.b("a")).st_size, 0)
        self.assert_logged("refused truncate path=/a size=4 end=10 errno=EOPNOTSUPP profile=hdfs")

    def test_safetensors_preallocation_fails(self):
        fd = self.open(".tmpABCDEF", os.O_RDWR | os.O_CREAT | os.O_EXCL)
        self.assert_errno(errno.EOPNOTSUPP, os.ftruncate, fd, 4096)

    def test_fallocate_fails(self):
        fd = self.open("a", os.O_WRONLY | os.O_CREAT)
        self.assertEqual(raw_fallocate(fd, 0, 100), errno.EOPNOTSUPP)
        self.assert_errno(errno.EOPNOTSUPP, os.posix_fallocate, fd, 0, 100)
        self.assertEqual(os.stat(self.b("a")).st_size, 0)
        self.assert_logged("refused fallocate path=/a offset=0 size=100", "errno=EOPNOTSUPP")

    def test_rename_and_unlink_work(self):
        self.seed("a", b"data")
        os.rename(self.m("a"), self.m("b"))
        self.assertEqual(read_bytes(self.b("b")), b"data")
        os.unlink(self.m("b"))
        self.assertEqual(os.listdir(self.backing), [])

    def test_rename_onto_an_existing_file_fails_eio(self):
        # fuse_dfs: hdfsRename -> FileSystem#rename returns false when the destination exists -> EIO.
        self.seed("a", b"new!")
        self.seed("b", b"old!")
        self.assert_errno(errno.EIO, os.rename, self.m("a"), self.m("b"))
        self.assertEqual(read_bytes(self.b("a")), b"new!")
        self.assertEqual(read_bytes(self.b("b")), b"old!")
        self.assert_logged("refused rename path=/a to=/b errno=EIO profile=hdfs reason=destination-exists")

    def test_rename_into_an_existing_directory_works(self):
        self.seed("a", b"data")
        os.mkdir(self.m("d"))
        os.rename(self.m("a"), self.m("d/a"))
        self.assertEqual(read_bytes(self.b("d/a")), b"data")

    def test_pytorch_dcp_r_plus_b_reproduces_errno_95(self):
        path = self.m("model-00001-of-00002.safetensors")
        with open(path, "wb") as f:
            f.write(b"HEADER")
        with self.assertRaises(OSError) as caught:
            with open(path, "r+b") as f:
                f.seek(0, os.SEEK_END)
                f.write(memoryview(b"tensor-bytes"))
                f.flush()
        self.assertEqual(caught.exception.errno, 95)
        self.assertEqual(read_bytes(self.b("model-00001-of-00002.safetensors")), b"HEADER")


class HdfsTruncateIgnoreTests(MountTest):
    profile = "hdfs"
    options = ("truncate=ignore",)

    def test_non_zero_truncate_is_silently_ignored(self):
        self.seed("a", b"0123456789")
        os.truncate(self.m("a"), 4)
        fd = self.open("a", os.O_WRONLY | os.O_APPEND)
        os.ftruncate(fd, 100)
        self.assertEqual(read_bytes(self.b("a")), b"0123456789")
        os.ftruncate(fd, 0)
        self.assertEqual(os.stat(self.b("a")).st_size, 0)
        self.assert_logged("ignored truncate path=/a size=4 end=10")


class S3Tests(MountTest):
    profile = "s3"

    def test_rdwr_existing_is_read_handle_writes_fail_ebadf(self):
        self.seed("a", b"object")
        fd = self.open("a", os.O_RDWR)
        self.assertEqual(os.read(fd, 3), b"obj")
        self.assert_errno(errno.EBADF, os.pwrite, fd, b"x", 6)
        self.assertEqual(read_bytes(self.b("a")), b"object")
        self.assert_logged("refused write path=/a", "errno=EBADF profile=s3")

    def test_wronly_existing_without_trunc_fails_eperm(self):
        self.seed("a", b"object")
        self.assert_errno(errno.EPERM, os.open, self.m("a"), os.O_WRONLY)
        self.assert_errno(errno.EPERM, os.open, self.m("a"), os.O_WRONLY | os.O_APPEND)
        self.assertEqual(read_bytes(self.b("a")), b"object")
        self.assert_logged("refused open path=/a flags=O_WRONLY errno=EPERM profile=s3")

    def test_wronly_trunc_existing_overwrites(self):
        self.seed("a", b"object")
        fd = self.open("a", os.O_WRONLY | os.O_TRUNC)
        os.write(fd, b"new")
        os.write(fd, b"er")
        os.close(fd)
        self.assertEqual(read_bytes(self.b("a")), b"newer")

    def test_rdwr_missing_creates_write_handle(self):
        fd = self.open("n", os.O_RDWR | os.O_CREAT)
        os.write(fd, b"abc")
        self.assertEqual(read_bytes(self.b("n")), b"abc")

    def test_out_of_order_write_fails_einval_and_poisons_handle(self):
        fd = self.open("n", os.O_WRONLY | os.O_CREAT)
        os.write(fd, b"0123")
        self.assert_errno(errno.EINVAL, os.pwrite, fd, b"x", 100)
        self.assert_errno(errno.EINVAL, os.pwrite, fd, b"x", 4)  # the right offset, but poisoned
        self.assert_errno(errno.EINVAL, os.write, fd, b"x")
        self.assertEqual(read_bytes(self.b("n")), b"0123")
        self.assert_logged("refused write path=/n offset=100 size=1 end=4 errno=EINVAL profile=s3 reason=out-of-order")
        self.assert_logged("refused write path=/n offset=4 size=1 end=4 errno=EINVAL profile=s3 reason=poisoned")

    def test_first_write_must_start_at_zero(self):
        fd = self.open("n", os.O_WRONLY | os.O_CREAT)
        self.assert_errno(errno.EINVAL, os.pwrite, fd, b"x", 1)

    def test_truncate_of_existing_non_empty_file_fails_eperm(self):
        self.seed("a", b"object")
        self.assert_errno(errno.EPERM, os.truncate, self.m("a"), 0)
        self.assert_errno(errno.EPERM, os.truncate, self.m("a"), 100)
        self.assertEqual(read_bytes(self.b("a")), b"object")
        self.seed("empty", b"")
        os.truncate(self.m("empty"), 0)
        self.assert_logged("refused truncate path=/a size=0 end=6 errno=EPERM profile=s3")

    def test_rename_fails_enosys_unlink_works(self):
        self.seed("a", b"object")
        self.assert_errno(errno.ENOSYS, os.rename, self.m("a"), self.m("b"))
        self.assertEqual(os.listdir(self.backing), ["a"])
        self.assert_logged("refused rename path=/a to=/b errno=ENOSYS profile=s3")
        os.unlink(self.m("a"))
        self.assertEqual(os.listdir(self.backing), [])

    def test_fallocate_fails(self):
        fd = self.open("n", os.O_WRONLY | os.O_CREAT)
        self.assertEqual(raw_fallocate(fd, 0, 10), errno.EOPNOTSUPP)

    # mountpoint-s3 doc/SEMANTICS.md: "A file can not have a reader and a writer file handle open at the
    # same time, and attempting to do so will result in an EPERM error for the second open request".
    def test_a_file_being_written_cannot_be_opened_again(self):
        fd = self.open("n", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        os.write(fd, b"abc")
        self.assert_errno(errno.EPERM, os.open, self.m("n"), os.O_RDONLY)
        self.assert_errno(errno.EPERM, os.open, self.m("n"), os.O_WRONLY | os.O_TRUNC)
        self.assert_logged("refused open path=/n flags=O_RDONLY errno=EPERM profile=s3 reason=busy")
        os.close(fd)
        self.assertEqual(read_bytes(self.m("n")), b"abc")  # readable once closed

    def test_a_file_being_read_cannot_be_overwritten_and_readers_share(self):
        self.seed("a", b"object")
        reader = self.open("a", os.O_RDONLY)
        second = self.open("a", os.O_RDONLY)
        self.assertEqual(os.pread(second, 3, 0), b"obj")
        self.assert_errno(errno.EPERM, os.open, self.m("a"), os.O_WRONLY | os.O_TRUNC)
        self.assertEqual(read_bytes(self.b("a")), b"object")  # refused before the truncation
        os.close(reader)
        os.close(second)
        fd = self.open("a", os.O_WRONLY | os.O_TRUNC)
        os.write(fd, b"new")
        os.close(fd)
        self.assertEqual(read_bytes(self.b("a")), b"new")

    # SEMANTICS.md: fsync "complete[s] the upload of the object to S3 and disallow[s] further writes";
    # fs/handles.rs UploadState::write answers EIO "upload already completed".
    def test_fsync_ends_the_upload_later_writes_fail_eio(self):
        fd = self.open("n", os.O_WRONLY | os.O_CREAT)
        os.write(fd, b"abc")
        os.fsync(fd)
        self.assert_errno(errno.EIO, os.write, fd, b"def")
        self.assert_logged("refused write path=/n offset=3 size=3 end=3 errno=EIO profile=s3 reason=upload-complete")
        self.assertEqual(read_bytes(self.m("n")), b"abc")  # the upload is done: readable while still open

    # A close (flush) by the opening process after a write completes the upload: a duplicate made before
    # cannot write on; before any write, or from another process, the close defers it (dd, touch, fork).
    def test_close_after_a_write_ends_the_upload_for_duplicates(self):
        fd = self.open("n", os.O_WRONLY | os.O_CREAT)
        duplicate = os.dup(fd)
        self.addCleanup(lambda: _close_quietly(duplicate))
        os.write(fd, b"abc")
        os.close(fd)
        self.assert_errno(errno.EIO, os.write, duplicate, b"def")
        empty = self.open("e", os.O_WRONLY | os.O_CREAT)
        kept = os.dup(empty)
        self.addCleanup(lambda: _close_quietly(kept))
        os.close(empty)  # nothing written yet: the upload goes on through the duplicate
        os.write(kept, b"xyz")
        os.close(kept)
        self.assertEqual(read_bytes(self.b("e")), b"xyz")

    def test_child_closing_an_inherited_descriptor_does_not_end_the_upload(self):
        fd = self.open("n", os.O_WRONLY | os.O_CREAT)
        os.write(fd, b"abc")
        subprocess.run([sys.executable, "-c", f"import os; os.close({fd})"], pass_fds=(fd,), check=True)
        os.write(fd, b"def")
        os.close(fd)
        self.assertEqual(read_bytes(self.b("n")), b"abcdef")

    # fs.rs setattr passes only the times on; superblock.rs setattr refuses a committed ("Remote") file
    # with EPERM and accepts a file being written: a size change then returns 0 and does nothing
    # (safetensors 0.8's set_len on its new temporary file succeeds; the save fails later, at rename).
    def test_truncate_of_a_file_being_written_succeeds_and_changes_nothing(self):
        fd = self.open("n", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, 4096)
        self.assertEqual(os.fstat(fd).st_size, 0)
        os.write(fd, b"abc")
        os.ftruncate(fd, 1)
        os.truncate(self.m("n"), 0)  # by name, while the writer is open
        os.write(fd, b"def")
        os.close(fd)
        self.assertEqual(read_bytes(self.b("n")), b"abcdef")
        self.assert_logged("ignored truncate path=/n size=4096 end=0 profile=s3 reason=while-written")
        self.assert_errno(errno.EPERM, os.truncate, self.m("n"), 0)  # committed now

    # superblock.rs unlink: "unlink on local file not allowed until write is complete" (EPERM).
    def test_unlink_of_a_file_being_written_fails_eperm(self):
        fd = self.open("n", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"abc")
        self.assert_errno(errno.EPERM, os.unlink, self.m("n"))
        self.assertEqual(os.listdir(self.backing), ["n"])
        self.assert_logged("refused unlink path=/n errno=EPERM profile=s3 reason=being-written")
        os.close(fd)
        os.unlink(self.m("n"))
        self.assertEqual(os.listdir(self.backing), [])

    # fs.rs open: "O_SYNC and O_DSYNC are not supported" (EINVAL), for every open.
    def test_o_sync_and_o_dsync_opens_fail_einval(self):
        self.seed("a", b"object")
        self.assert_errno(errno.EINVAL, os.open, self.m("n"), os.O_WRONLY | os.O_CREAT | os.O_SYNC)
        self.assert_errno(errno.EINVAL, os.open, self.m("a"), os.O_RDONLY | os.O_DSYNC)
        self.assertEqual(sorted(os.listdir(self.backing)), ["a"])
        self.assert_logged("refused open path=/a", "errno=EINVAL profile=s3 reason=sync")

    # "you cannot both read and write to the same file descriptor even in this mode" (fs.rs read: EBADF).
    def test_reads_through_a_write_handle_fail_ebadf(self):
        fd = self.open("n", os.O_RDWR | os.O_CREAT)
        os.write(fd, b"abc")
        self.assert_errno(errno.EBADF, os.pread, fd, 3, 0)
        self.assert_logged("refused read path=/n", "errno=EBADF profile=s3 reason=write-handle")


class VolumesTests(MountTest):
    """Databricks Unity Catalog volumes (the sources are in profiles.cpp and docs/stores.md)."""
    profile = "volumes"

    def test_new_file_and_o_trunc_overwrite_are_written_sequentially(self):
        fd = self.open("n", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"abc")
        os.write(fd, b"def")
        os.close(fd)
        self.assertEqual(read_bytes(self.b("n")), b"abcdef")
        write_file(self.m("n"), b"replaced")  # "wb": O_WRONLY|O_CREAT|O_TRUNC
        self.assertEqual(read_bytes(self.b("n")), b"replaced")
        self.assertEqual(self.log_lines(), [])

    def test_appends_fail_errno_95_file_intact(self):
        self.seed("log.txt", b"start\n")
        fd = self.open("log.txt", os.O_WRONLY | os.O_APPEND)
        self.assert_errno(errno.EOPNOTSUPP, os.write, fd, b"more\n")
        self.assertEqual(read_bytes(self.b("log.txt")), b"start\n")
        self.assert_logged("refused write path=/log.txt", "errno=EOPNOTSUPP profile=volumes reason=read-handle")
        with self.assertRaises(OSError) as caught:
            with open(self.m("log.txt"), "ab") as f:
                f.write(b"more\n")
        self.assertEqual(caught.exception.errno, errno.EOPNOTSUPP)

    def test_r_plus_b_existing_writes_fail_errno_95(self):
        self.seed("a.safetensors", b"0123456789")
        fd = self.open("a.safetensors", os.O_RDWR)
        self.assertEqual(os.pread(fd, 4, 0), b"0123")
        self.assert_errno(errno.EOPNOTSUPP, os.pwrite, fd, b"x", 10)
        self.assert_errno(errno.EOPNOTSUPP, os.pwrite, fd, b"x", 0)
        self.assertEqual(read_bytes(self.b("a.safetensors")), b"0123456789")

    def test_non_sequential_writes_fail_errno_95_handle_stays_usable(self):
        fd = self.open("n", os.O_WRONLY | os.O_CREAT)
        os.write(fd, b"0123")
        self.assert_errno(errno.EOPNOTSUPP, os.pwrite, fd, b"x", 100)
        self.assert_errno(errno.EOPNOTSUPP, os.pwrite, fd, b"x", 0)
        os.write(fd, b"45")
        self.assertEqual(read_bytes(self.b("n")), b"012345")
        self.assert_logged("refused write path=/n offset=100 size=1 end=4 errno=EOPNOTSUPP profile=volumes "
                           "reason=non-sequential")

    def test_preallocation_fails_truncate_to_zero_works(self):
        fd = self.open("n", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        self.assert_errno(errno.EOPNOTSUPP, os.ftruncate, fd, 4096)  # safetensors 0.8's set_len
        self.assertEqual(raw_fallocate(fd, 0, 4096), errno.EOPNOTSUPP)
        self.seed("a", b"object")
        os.truncate(self.m("a"), 0)
        self.assertEqual(read_bytes(self.b("a")), b"")

    def test_rename_fails_enosys_and_unlink_works(self):
        self.seed("a", b"object")
        self.seed("b", b"other")
        self.assert_errno(errno.ENOSYS, os.rename, self.m("a"), self.m("c"))
        self.assert_errno(errno.ENOSYS, os.rename, self.m("a"), self.m("b"))
        self.assertEqual(sorted(os.listdir(self.backing)), ["a", "b"])
        self.assert_logged("refused rename path=/a to=/c errno=ENOSYS profile=volumes")
        os.unlink(self.m("a"))
        self.assertEqual(os.listdir(self.backing), ["b"])

    def test_readers_and_writers_may_overlap(self):
        fd = self.open("n", os.O_WRONLY | os.O_CREAT)
        os.write(fd, b"abc")
        self.assertEqual(read_bytes(self.m("n")), b"abc")  # no source says volumes refuse this


class StrictTests(MountTest):
    profile = "strict"

    def test_rdwr_existing_allows_appends_only(self):
        self.seed("a", b"0123456789")
        fd = self.open("a", os.O_RDWR)
        self.assertEqual(os.read(fd, 4), b"0123")
        self.assert_errno(errno.EOPNOTSUPP, os.pwrite, fd, b"x", 0)
        self.assert_errno(errno.EOPNOTSUPP, os.pwrite, fd, b"x", 11)
        os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, b"ab")
        self.assertEqual(read_bytes(self.b("a")), b"0123456789ab")
        self.assert_logged("refused write path=/a offset=0 size=1 end=10 errno=EOPNOTSUPP profile=strict")

    def test_wronly_existing_keeps_contents_and_requires_appends(self):
        self.seed("a", b"0123")
        fd = self.open("a", os.O_WRONLY)
        self.assert_errno(errno.EOPNOTSUPP, os.write, fd, b"x")
        self.assertEqual(os.pwrite(fd, b"45", 4), 2)
        self.assertEqual(read_bytes(self.b("a")), b"012345")

    def test_o_trunc_of_non_empty_file_refused_at_open(self):
        self.seed("a", b"0123")
        self.assert_errno(errno.EOPNOTSUPP, os.open, self.m("a"), os.O_WRONLY | os.O_TRUNC)
        self.assertEqual(read_bytes(self.b("a")), b"0123")
        self.seed("empty", b"")
        fd = self.open("empty", os.O_WRONLY | os.O_TRUNC)
        os.write(fd, b"ok")
        self.assertEqual(read_bytes(self.b("empty")), b"ok")
        self.assert_logged("refused open path=/a flags=O_WRONLY|O_TRUNC errno=EOPNOTSUPP profile=strict")

    def test_size_changes_refused(self):
        self.seed("a", b"0123")
        fd = self.open("a", os.O_WRONLY | os.O_APPEND)
        self.assert_errno(errno.EOPNOTSUPP, os.ftruncate, fd, 0)
        self.assert_errno(errno.EOPNOTSUPP, os.ftruncate, fd, 10)
        self.assert_errno(errno.EOPNOTSUPP, os.truncate, self.m("a"), 2)
        os.ftruncate(fd, 4)  # no size change
        self.assertEqual(raw_fallocate(fd, 0, 100), errno.EOPNOTSUPP)
        self.assertEqual(read_bytes(self.b("a")), b"0123")

    def test_rename_onto_an_existing_file_works(self):
        self.seed("a", b"new!")
        self.seed("b", b"old!")
        os.rename(self.m("a"), self.m("b"))
        self.assertEqual(read_bytes(self.b("b")), b"new!")
        self.assertFalse(os.path.exists(self.b("a")))

    def test_rename_works(self):
        self.seed("a", b"x")
        os.rename(self.m("a"), self.m("b"))
        self.assertEqual(os.listdir(self.backing), ["b"])


class ShortWriteTests(MountTest):
    options = ("short_writes=3",)

    def test_every_write_is_short(self):
        fd = self.open("a", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        self.assertEqual(os.write(fd, b"abcdefgh"), 3)
        self.assertEqual(os.write(fd, b"de"), 2)
        self.assertEqual(read_bytes(self.b("a")), b"abcde")
        self.assert_logged("fault short op=write path=/a offset=0 size=8 accepted=3 cause=short_writes")
        self.assertEqual(len(self.log_lines()), 1)

    def test_buffered_writer_retries_short_writes(self):
        with open(self.m("a"), "wb", buffering=0) as f:
            data = b"0123456789" * 10
            done = 0
            while done < len(data):
                done += f.write(data[done:])
        self.assertEqual(read_bytes(self.b("a")), b"0123456789" * 10)


class FailAfterTests(MountTest):
    options = ("fail_after=10",)

    def test_enospc_after_byte_budget(self):
        fd = self.open("a", os.O_WRONLY | os.O_CREAT)
        self.assertEqual(os.write(fd, b"12345678"), 8)
        self.assertEqual(os.write(fd, b"abcdef"), 2)
        self.assert_errno(errno.ENOSPC, os.write, fd, b"z")
        fd2 = self.open("b", os.O_WRONLY | os.O_CREAT)
        self.assert_errno(errno.ENOSPC, os.write, fd2, b"z")
        self.assertEqual(read_bytes(self.b("a")), b"12345678ab")
        self.assert_logged("fault short op=write path=/a offset=8 size=6 accepted=2 cause=fail_after")
        self.assert_logged("fault enospc op=write path=/a offset=10 size=1 errno=ENOSPC cause=fail_after")
        self.assert_logged("fault enospc op=write path=/b offset=0 size=1 errno=ENOSPC")


class EioEveryTests(MountTest):
    options = ("eio_every=3",)

    def test_every_third_write_fails_eio_writing_nothing(self):
        fd = self.open("a", os.O_WRONLY | os.O_CREAT)
        os.write(fd, b"1")
        os.write(fd, b"2")
        self.assert_errno(errno.EIO, os.write, fd, b"3")
        os.write(fd, b"4")
        os.write(fd, b"5")
        self.assert_errno(errno.EIO, os.write, fd, b"6")
        self.assertEqual(read_bytes(self.b("a")), b"1245")
        self.assert_logged("fault eio op=write path=/a offset=2 size=1 errno=EIO cause=eio_every")
        self.assertEqual(len(self.log_lines()), 2)


class DelayTests(MountTest):
    options = ("delay_us=150000",)

    def test_writes_are_delayed(self):
        fd = self.open("a", os.O_WRONLY | os.O_CREAT)
        start = time.monotonic()
        os.write(fd, b"x")
        self.assertGreaterEqual(time.monotonic() - start, 0.14)
        self.assertEqual(read_bytes(self.b("a")), b"x")


class CombinedOptionsTests(MountTest):
    profile = "s3"
    options = ("short_writes=4", "eio_every=100", "fail_after=1000000")

    def test_profile_and_faults_combine(self):
        fd = self.open("a", os.O_WRONLY | os.O_CREAT)
        self.assertEqual(os.write(fd, b"0123456789"), 4)
        self.assert_errno(errno.EINVAL, os.pwrite, fd, b"x", 10)
        self.assertEqual(read_bytes(self.b("a")), b"0123")


class CliTests(unittest.TestCase):
    def run_binary(self, *args):
        return subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=10)

    def assert_bad_argument(self, args, *fragments):
        result = self.run_binary(*args)
        self.assertEqual(result.returncode, 2, result)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        for fragment in fragments:
            self.assertIn(fragment, lines[0])

    def test_version_and_help(self):
        result = self.run_binary("--version")
        self.assertEqual((result.returncode, result.stdout), (0, "appendonlyfs 0.1.0\n"))
        result = self.run_binary("--help")
        self.assertEqual(result.returncode, 0)
        for word in ("profile=hdfs|s3|strict|volumes", "Databricks", "short_writes", "fail_after", "eio_every", "delay_us", "log=FILE"):
            self.assertIn(word, result.stdout)

    def test_bad_arguments(self):
        with tempfile.TemporaryDirectory() as d:
            self.assert_bad_argument(["-o", "profile=nfs", d, d], "profile", "nfs", "hdfs, s3, strict, volumes")
            self.assert_bad_argument(["-o", "short_writes=abc", d, d], "short_writes", "abc", "positive integer")
            self.assert_bad_argument(["-o", "short_writes=0", d, d], "short_writes", "positive integer")
            self.assert_bad_argument(["-o", "fail_after=-1", d, d], "fail_after", "-1", "non-negative integer")
            self.assert_bad_argument(["-o", "eio_every=3x", d, d], "eio_every", "3x")
            self.assert_bad_argument(["-o", "delay_us=", d, d], "delay_us")
            self.assert_bad_argument(["-o", "truncate=maybe", d, d], "truncate", "maybe", "refuse or ignore")
            self.assert_bad_argument(["-o", "shortwrites=3", d, d], "unknown -o option", "shortwrites=3", "short_writes")
            self.assert_bad_argument(["-x", d, d], "unknown argument", "-x")
            self.assert_bad_argument([d], "missing MOUNTPOINT")
            self.assert_bad_argument([], "missing BACKING")
            self.assert_bad_argument([d, d, d], "unexpected argument")
            self.assert_bad_argument([os.path.join(d, "nope"), d], "BACKING", "nope", "existing directory")
            self.assert_bad_argument([d, os.path.join(d, "nope")], "MOUNTPOINT", "nope", "existing directory")
            self.assert_bad_argument(["-o", f"log={d}/no/such/dir/log", d, d], "log=", "no/such/dir")


GROUPS = {
    "cli": [CliTests],
    "common": [HdfsCommon, S3Common, StrictCommon, VolumesCommon],
    "hdfs": [HdfsTests, HdfsTruncateIgnoreTests],
    "s3": [S3Tests],
    "strict": [StrictTests],
    "volumes": [VolumesTests],
    "faults": [ShortWriteTests, FailAfterTests, EioEveryTests, DelayTests, CombinedOptionsTests],
}


def check_mount_possible():
    aofs.skip_or_fail_without_fuse(f"appendonlyfs mount tests ({BINARY})")
    try:
        with aofs.mounted(BINARY):
            pass
    except aofs.MountError as error:
        if aofs.fuse_required():
            print(f"FAIL: cannot mount appendonlyfs and APPENDGUARD_REQUIRE_FUSE=1: {error}", file=sys.stderr)
            sys.exit(1)
        print(f"SKIP: FUSE is present but a mount cannot be made here: {error}")
        sys.exit(aofs.SKIP_RETURN_CODE)


def main():
    global BINARY
    if len(sys.argv) != 3 or sys.argv[2] not in GROUPS:
        print(__doc__, file=sys.stderr)
        return 2
    BINARY, group = os.path.abspath(sys.argv[1]), sys.argv[2]
    if group != "cli":
        check_mount_possible()
    loader = unittest.TestLoader()
    suite = unittest.TestSuite(loader.loadTestsFromTestCase(case) for case in GROUPS[group])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
