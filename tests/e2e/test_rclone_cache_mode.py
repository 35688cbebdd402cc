"""rclone's cache mode decides what the library does on an rclone mount (issue 23, "never worse than
without"). The mount table shows every rclone mount as fuse.rclone; the library reads the serving rclone
process's --vfs-cache-mode from /proc. With `writes` rclone accepts writes below the end and in-place
updates like a local disk, so a file no APPENDGUARD_PATHS pattern names is not guarded there: bash `>>`,
`rsync --inplace` of an existing file and `dd conv=notrunc seek=0` are byte for byte the local run (before:
the whole mount was guarded as write-once and rsync --inplace and dd were refused). A `.safetensors` file
(named by the default pattern) keeps the end-of-file rule there. With `off` the mount stays write-once and
guarded whole: each case is the local run's bytes or a loud failure with the file as it was.
Exits 77 without FUSE or rclone unless APPENDGUARD_REQUIRE_FUSE=1.
"""
import os
import subprocess
import unittest

import e2e_support
from e2e_support import harness, read_bytes
from rclone_mount import rclone_mounted

OLD = bytes((i * 7 + 3) % 251 for i in range(4096))
NEW = bytes((i * 13 + 5) % 241 for i in range(3000))


def commands(src, target):
    return {
        "bash_append": ["bash", "-c", f'cat "{src}" >> "{target}"'],
        "rsync_inplace": ["rsync", "--inplace", "--no-whole-file", "-I", src, target],
        "dd_notrunc_seek0": ["dd", f"if={src}", f"of={target}", "conv=notrunc", "seek=0", "status=none"],
    }


class Cases:
    def settled(self, path, timeout=5.0):
        return e2e_support.settled(path, timeout)

    def run_case(self, name, file_name):
        """(local bytes, with-library process, bytes on the store after it)."""
        local = os.path.join(self.dir, "local")
        os.makedirs(local, exist_ok=True)
        reference = os.path.join(local, file_name)
        with open(reference, "wb") as f:
            f.write(OLD)
        proc = subprocess.run(commands(self.src, reference)[name], env=harness.child_env(None, False),
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        target = os.path.join(self.mnt, file_name)
        with open(target, "wb") as f:
            f.write(OLD)
        self.assertEqual(self.settled(os.path.join(self.backing, file_name)), OLD)
        proc = harness.run(commands(self.src, target)[name])
        return read_bytes(reference), proc, self.settled(os.path.join(self.backing, file_name))

    def setUp(self):
        super().setUp()
        self.backing, self.mnt, _ = self.enterContext(
            rclone_mounted(self.dir, self.MODE, self.EXTRA, on_mount=e2e_support.ACTIVE_MOUNTS.add))
        self.addCleanup(e2e_support.ACTIVE_MOUNTS.discard, self.mnt)
        self.src = os.path.join(self.dir, "src.bin")
        with open(self.src, "wb") as f:
            f.write(NEW)


class RcloneWrites(Cases, harness.TempDirTest):
    MODE, EXTRA = "writes", ("--vfs-write-back", "0s")

    def test_unnamed_files_are_byte_identical_to_a_local_disk_without_a_word(self):
        for name in commands("s", "t"):
            with self.subTest(case=name):
                expected, proc, written = self.run_case(name, name + ".bin")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(written, expected, proc.stderr)
                self.assertNotIn("appendguard", proc.stderr)

    def test_a_file_named_by_a_pattern_keeps_the_end_of_file_rule(self):
        expected, proc, written = self.run_case("dd_notrunc_seek0", "named.safetensors")
        self.assertNotEqual(proc.returncode, 0, "a write below the end of a .safetensors file went through")
        self.assertIn("appendguard:", proc.stderr)
        self.assertEqual(written, OLD)


class RcloneEnvironmentWrites(RcloneWrites):
    """The mode from rclone's environment (RCLONE_VFS_CACHE_MODE), no flag on its command line."""
    MODE, EXTRA = None, ("--vfs-write-back", "0s")

    def setUp(self):
        os.environ["RCLONE_VFS_CACHE_MODE"] = "writes"
        self.addCleanup(os.environ.pop, "RCLONE_VFS_CACHE_MODE", None)
        super().setUp()


class RcloneOff(Cases, harness.TempDirTest):
    MODE, EXTRA = "off", ()

    def test_each_case_is_identical_or_loud_with_the_file_intact(self):
        for name in commands("s", "t"):
            with self.subTest(case=name):
                expected, proc, written = self.run_case(name, name + ".bin")
                if proc.returncode == 0:
                    self.assertEqual(written, expected, proc.stderr)
                else:
                    self.assertIn("appendguard:", proc.stderr)
                    self.assertEqual(written, OLD, proc.stderr)


if __name__ == "__main__":
    e2e_support.main()
