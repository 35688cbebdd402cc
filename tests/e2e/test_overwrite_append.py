"""Overwrites and appends without a seek on the stores (issue 23's rule): with APPENDGUARD=1 alone, each
run is byte for byte the same run on a local disk, or fails loudly (an `appendguard:` line) with the file
as it was. Each case starts from an existing 100-byte file.

* Overwrite (`open(p, "wb").write(...)`, `cp` onto the file, `dd` without conv=notrunc, bash's `>` with cat
  inheriting the descriptor, "wb" then a fork: all O_TRUNC opens):
  on rclone --vfs-cache-mode off fstat reports the old size for seconds after the O_TRUNC open; the library
  took its end of file from it, refused every write and committed an empty file (exit 0 for the "wb"
  idiom).
* Append without a seek (bash `cat >> f` and `printf >> f`, `dd oflag=append conv=notrunc`,
  os.open(O_APPEND) + write): on rclone the library writes the file anew (hold mode's fallback); bash and
  dd then dup2 the descriptor and close the original, a FUSE FLUSH that made rclone end the upload under
  the program's other descriptor (its write failed EBADF, with a notice recommending
  APPENDGUARD_REOPEN=append, which does not work there). The closed number is now kept open until the
  file's last descriptor closes.
Stores: rclone off and writes (over a local folder), appendonlyfs s3 and hdfs. Exits 77 without FUSE or
rclone unless APPENDGUARD_REQUIRE_FUSE=1.
"""
import os
import subprocess

import e2e_support
from e2e_support import PYTHON, harness, read_bytes
from rclone_mount import rclone_mounted

OLD = bytes(range(100))
NEW = b"new bytes\n"


def commands(src, target):
    return {
        "python_wb": [PYTHON, "-c", f"open({target!r}, 'wb').write({NEW!r})"],
        "cp_onto": ["cp", src, target],
        "dd_trunc": ["dd", f"if={src}", f"of={target}", "status=none"],
        # The shell opens "wb" and cat inherits it across exec (the end must not come from fstat there).
        "bash_cat_overwrite": ["bash", "-c", f'cat "{src}" > "{target}"'],
        # A fork shares the "wb" description: its offset is read back before each write (not fstat's size).
        "python_wb_after_fork": [PYTHON, "-c", f"import os\nf = open({target!r}, 'wb')\npid = os.fork()\n"
                                               f"if pid == 0: os._exit(0)\nos.waitpid(pid, 0)\n"
                                               f"f.write({NEW!r})\nf.close()"],
        "bash_cat_append": ["bash", "-c", f'cat "{src}" >> "{target}"'],
        "bash_printf_append": ["bash", "-c", f'printf "new bytes\\n" >> "{target}"'],
        "dd_oflag_append": ["dd", f"if={src}", f"of={target}", "oflag=append", "conv=notrunc", "status=none"],
        # Another file's session held at the exec (committed there), this one's closed number parked: the
        # exec'd cat appends through the dup2'd descriptor.
        "python_exec_append_with_a_held_file": [
            PYTHON, "-c", f"import os\nopen({target!r} + '.other', 'wb').write(b'other')\n"
                          f"fd = os.open({target!r}, os.O_WRONLY | os.O_APPEND)\nos.dup2(fd, 1)\nos.close(fd)\n"
                          f"os.execvp('cat', ['cat', {src!r}])"],
        "python_os_open_append": [PYTHON, "-c", f"import os; fd = os.open({target!r}, os.O_WRONLY | os.O_APPEND); "
                                                f"os.write(fd, {NEW!r}); os.close(fd)"],
    }


class Cases:
    def settled(self, path, timeout=5.0):
        return e2e_support.settled(path, timeout)

    def reference(self, name):
        local = os.path.join(self.dir, "local")
        os.makedirs(local, exist_ok=True)
        target = os.path.join(local, name + ".safetensors")
        with open(target, "wb") as f:
            f.write(OLD)
        proc = subprocess.run(commands(self.src, target)[name], env=harness.child_env(None, False),
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return read_bytes(target)

    def test_overwrite_and_append_are_byte_identical_to_local_or_loud_with_the_file_intact(self):
        self.src = os.path.join(self.dir, "src.bin")
        with open(self.src, "wb") as f:
            f.write(NEW)
        for name in commands(self.src, "x"):
            with self.subTest(store=self.STORE, case=name):
                expected = self.reference(name)
                target = os.path.join(self.mnt, name + ".safetensors")
                with open(target, "wb") as f:
                    f.write(OLD)
                self.assertEqual(self.settled(os.path.join(self.backing, name + ".safetensors")), OLD)
                proc = harness.run(commands(self.src, target)[name])
                written = self.settled(os.path.join(self.backing, name + ".safetensors"))
                if proc.returncode == 0:
                    self.assertEqual(written, expected, proc.stderr)
                else:
                    self.assertIn("appendguard:", proc.stderr)
                    self.assertEqual(written, OLD, proc.stderr)
                if name in self.MUST_MATCH:
                    self.assertEqual(proc.returncode, 0, proc.stderr)
                    self.assertEqual(written, expected)
                    self.assertNotIn("appendguard", proc.stderr)


ALL = tuple(commands("s", "t"))
APPENDS = ("bash_cat_append", "dd_oflag_append", "python_os_open_append")


class ForcedAppendReopen:
    def test_forced_append_reopen_fails_loudly_naming_what_works_and_keeps_the_file(self):
        # APPENDGUARD_REOPEN=append on a write-once store: the program's own O_APPEND fails as without the
        # library, with one line naming the settings that work there (checked below), never silently.
        src = os.path.join(self.dir, "src.bin")
        with open(src, "wb") as f:
            f.write(NEW)
        for name in APPENDS:
            with self.subTest(store=self.STORE, case=name):
                target = os.path.join(self.mnt, "forced-" + name + ".safetensors")
                with open(target, "wb") as f:
                    f.write(OLD)
                proc = harness.run(commands(src, target)[name], APPENDGUARD_REOPEN="append")
                self.assertNotEqual(proc.returncode, 0)
                notices = [line for line in proc.stderr.splitlines() if line.startswith("appendguard:")]
                self.assertEqual(len(notices), 1, proc.stderr)
                self.assertIn("APPENDGUARD_REOPEN=rewrite", notices[0])
                self.assertNotIn("APPENDGUARD_REOPEN=append", notices[0])
                self.assertEqual(self.settled(os.path.join(self.backing, "forced-" + name + ".safetensors")), OLD)
                # The setting named works: the same append with it is the local run's bytes.
                proc = harness.run(commands(src, target)[name], APPENDGUARD_REOPEN="rewrite")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(self.settled(os.path.join(self.backing, "forced-" + name + ".safetensors")),
                                 OLD + NEW)


class RcloneOff(Cases, ForcedAppendReopen, harness.TempDirTest):
    STORE = "rclone off"
    MUST_MATCH = ALL

    def setUp(self):
        super().setUp()
        self.backing, self.mnt, _ = self.enterContext(
            rclone_mounted(self.dir, "off", on_mount=e2e_support.ACTIVE_MOUNTS.add))
        self.addCleanup(e2e_support.ACTIVE_MOUNTS.discard, self.mnt)


class RcloneWrites(Cases, harness.TempDirTest):
    STORE = "rclone writes"
    MUST_MATCH = ALL

    def setUp(self):
        super().setUp()
        self.backing, self.mnt, _ = self.enterContext(
            rclone_mounted(self.dir, "writes", ("--vfs-write-back", "0s"), on_mount=e2e_support.ACTIVE_MOUNTS.add))
        self.addCleanup(e2e_support.ACTIVE_MOUNTS.discard, self.mnt)


class AppendOnlyFsS3(Cases, ForcedAppendReopen, e2e_support.MountTest):
    STORE = "appendonlyfs s3"
    MUST_MATCH = ALL

    def setUp(self):
        super().setUp()
        self.backing, self.mnt = self.mount("s3")


class AppendOnlyFsHdfs(Cases, e2e_support.MountTest):
    STORE = "appendonlyfs hdfs"
    MUST_MATCH = ("bash_cat_append", "bash_printf_append", "dd_oflag_append", "python_os_open_append")

    def setUp(self):
        super().setUp()
        self.backing, self.mnt = self.mount("hdfs")


if __name__ == "__main__":
    e2e_support.main()
