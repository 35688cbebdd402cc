"""Debian's rclone as a real third-party write-once store: `rclone mount DIR MNT --vfs-cache-mode off`
accepts only sequential writes from offset 0, and an existing file only with O_TRUNC. An out-of-order
write stalls about a second in rclone, then fails ESPIPE; a write handle opened on an existing file
without O_TRUNC fails EPERM at close. The bytes are checked in the backing directory.

What holds (issue 8):
* with APPENDGUARD=1 alone the mount is recognised (fuse.rclone in mountinfo) as a write-once store and
  each file's first write session is held across the program's close and reused by its reopen: the DCP
  pattern is byte for byte the local run, and rclone logs no error (test_held_sessions has the rest);
* APPENDGUARD_REOPEN=rewrite makes the DCP pattern work too, byte for byte the local run;
* a forced APPENDGUARD_REOPEN=append reopen fails as without the library: the first tensor write ESPIPE,
  close EPERM (Python reports the close's "[Errno 1] Operation not permitted"), only the headers reach
  the store, and the library names the store's rule and the settings that work, once per file;
* a backward write on a guarded file is refused by the library before it reaches rclone.

Exits 77 (skip) without FUSE or rclone, unless APPENDGUARD_REQUIRE_FUSE=1, which makes either a failure.
"""
import os
import sys
import time
import unittest

import e2e_support
from e2e_support import DCP, PYTHON, aofs, e2e_script, files_of, harness, read_bytes, violations
from rclone_mount import RCLONE, rclone_mounted

DCP_ARGS = ["--files", "3", "--tensors", "4", "--tensor-bytes", "16384", "--workers", "3"]
REWRITE = e2e_script("rewrite.py")


class RcloneTest(harness.TempDirTest):
    def mount(self, cache_mode="off", extra_args=()):
        context = rclone_mounted(self.dir, cache_mode, extra_args=extra_args, on_mount=e2e_support.ACTIVE_MOUNTS.add)
        self.backing, self.mnt, self.log = self.enterContext(context)
        self.addCleanup(e2e_support.ACTIVE_MOUNTS.discard, self.mnt)

    def rclone_log(self):
        with open(self.log) as f:
            return f.read()

    def dcp_reference(self):
        local = self.path("local")
        proc = harness.run([PYTHON, DCP, local, *DCP_ARGS], mode=None, preload=False)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return files_of(local)

    def test_dcp_with_rewrite_reopen_is_byte_identical_to_local(self):
        self.mount()
        proc = harness.run([PYTHON, DCP, os.path.join(self.mnt, "out"), *DCP_ARGS], APPENDGUARD_REOPEN="rewrite")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(violations(proc.stderr), [])
        written, expected = files_of(os.path.join(self.backing, "out")), self.dcp_reference()
        self.assertEqual(sorted(written), sorted(expected))
        for name in expected:
            self.assertTrue(written[name] == expected[name], f"{name}: different bytes")
        self.assertNotIn("ERROR", self.rclone_log())

    def check_default_reopen_fails(self, proc):
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("dcp_consolidate: [Errno 1] Operation not permitted", proc.stderr)
        expected = self.dcp_reference()
        written = files_of(os.path.join(self.backing, "out"))
        self.assertEqual(len(written), 3)  # no index: the script died before it
        for name, data in written.items():
            header_size = 8 + int.from_bytes(expected[name][:8], "little")
            self.assertEqual(data, expected[name][:header_size], name)  # only the header reached the store
        log = self.rclone_log()
        self.assertEqual(log.count("WriteFileHandle.Write: can't seek in file"), 3, log)
        self.assertEqual(log.count("Can't open for write without O_TRUNC on existing file"), 3, log)

    def test_dcp_with_library_alone_holds_sessions_byte_identical_to_local(self):
        self.mount()
        proc = harness.run([PYTHON, DCP, os.path.join(self.mnt, "out"), *DCP_ARGS])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("appendguard", proc.stderr)
        written, expected = files_of(os.path.join(self.backing, "out")), self.dcp_reference()
        self.assertEqual(sorted(written), sorted(expected))
        for name in expected:
            self.assertTrue(written[name] == expected[name], f"{name}: different bytes")
        self.assertNotIn("ERROR", self.rclone_log())

    def test_dcp_forced_append_reopen_fails_espipe_then_eperm_and_says_why(self):
        self.mount()
        proc = harness.run([PYTHON, DCP, os.path.join(self.mnt, "out"), *DCP_ARGS], APPENDGUARD_REOPEN="append")
        self.check_default_reopen_fails(proc)
        # The store's refusal is explained once per reopened file, naming the setting that works here.
        notices = [line for line in proc.stderr.splitlines() if line.startswith("appendguard")]
        self.assertTrue(notices, proc.stderr)
        for line in notices:
            self.assertIn("failed with ESPIPE on a descriptor appendguard opened O_WRONLY|O_APPEND", line)
            self.assertIn("(the program asked for O_RDWR", line)
            self.assertIn("whose rule is one upload from offset 0 per file", line)
            self.assertIn("APPENDGUARD_REOPEN=hold", line)
            self.assertIn("APPENDGUARD_REOPEN=rewrite writes such files anew", line)
        self.assertEqual(len(notices), len({line.split(": ")[1] for line in notices}), "one notice per file")

    def test_dcp_without_library_fails_the_same_way(self):
        self.mount()
        proc = harness.run([PYTHON, DCP, os.path.join(self.mnt, "out"), *DCP_ARGS], mode=None, preload=False)
        self.check_default_reopen_fails(proc)

    def wait_for_upload(self, directory, expected, timeout=20.0):
        """The backing directory's files, once they equal expected or after timeout seconds."""
        deadline = time.monotonic() + timeout
        while True:
            written = files_of(directory) if os.path.isdir(directory) else {}
            if written == expected or time.monotonic() > deadline:
                return written
            time.sleep(0.05)

    def check_cached_mode(self, cache_mode):
        # The cache modes stage files locally: the DCP pattern works with and without the library. With
        # --vfs-write-back 0s rclone uploads each file as soon as it is closed.
        self.mount(cache_mode, ("--vfs-write-back", "0s"))
        expected = self.dcp_reference()
        for name, preload in (("plain", False), ("library", True)):
            with self.subTest(name):
                proc = harness.run([PYTHON, DCP, os.path.join(self.mnt, name), *DCP_ARGS],
                                   mode="1" if preload else None, preload=preload)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(violations(proc.stderr), [])
                written = self.wait_for_upload(os.path.join(self.backing, name), expected)
                self.assertEqual(sorted(written), sorted(expected))
                for leaf in expected:
                    self.assertTrue(written[leaf] == expected[leaf], f"{leaf}: different bytes")

    def test_dcp_on_cache_mode_minimal_works_with_and_without_library(self):
        self.check_cached_mode("minimal")

    def test_dcp_on_cache_mode_writes_works_with_and_without_library(self):
        self.check_cached_mode("writes")

    def test_backward_write_is_refused_by_the_library_and_the_store_keeps_the_file(self):
        # rewrite.py new: "w+b", 4096 bytes of "a", seek(1024), 512 bytes of "T".
        self.mount()
        proc = harness.run([PYTHON, REWRITE, "new", os.path.join(self.mnt, "r.safetensors")])
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("rewrite: [Errno 95] Operation not supported", proc.stderr)
        reports = violations(proc.stderr)
        self.assertGreaterEqual(len(reports), 1, proc.stderr)
        self.assertIn("bytes=512 offset=1024 end_of_file=4096: refused (EOPNOTSUPP)", reports[0])
        self.assertEqual(read_bytes(os.path.join(self.backing, "r.safetensors")), b"a" * 4096)
        self.assertNotIn("can't seek", self.rclone_log())  # nothing out of order reached rclone


def main():
    aofs.skip_or_fail_without_fuse("rclone tests")
    if RCLONE is None:
        if aofs.fuse_required():
            print("FAIL: rclone is not installed and APPENDGUARD_REQUIRE_FUSE=1: rclone tests", file=sys.stderr)
            sys.exit(1)
        print("SKIP: rclone is not installed (apt-get install rclone): skipping rclone tests")
        sys.exit(aofs.SKIP_RETURN_CODE)
    e2e_support.check_library_is_effective()
    e2e_support.install_signal_handlers()
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
