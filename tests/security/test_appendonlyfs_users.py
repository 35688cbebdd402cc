"""appendonlyfs as a shared mount (`-o allow_other`), and its log, against a second user.

- a file belongs to the user who created it, with the mode asked (the umask applied), and its creator
  reads it back; another user can neither read, append to, nor remove a 0600 file of someone else's in a
  sticky directory, nor chmod or chown it;
- `-o log=FILE` never follows a symlink (one line, status 2), and a file name with a newline cannot add
  a line of its own to the log;
- a 0600 file written through a store without rename (the library's spool) ends 0600, the victim's.
"""
import os
import stat
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aofs  # noqa: E402  (tests/appendonlyfs)
import two_users  # noqa: E402

APPENDONLYFS = os.environ["APPENDONLYFS"]
LIBRARY = os.environ["APPENDGUARD_LIB"]
EVENTS = ("refused ", "ignored ", "fault ", "aborted ")


class SharedMount(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        aofs.skip_or_fail_without_fuse("the shared-mount tests")
        cls.attacker, cls.victim = two_users.users()

    def mount(self, root, profile="hdfs", log=None):
        backing = os.path.join(root, "backing")
        mnt = os.path.join(root, "mnt")
        os.mkdir(backing)
        os.mkdir(mnt)
        options = [f"profile={profile}", "allow_other"] + ([f"log={log}"] if log else [])
        process = subprocess.Popen([APPENDONLYFS, "-f", "-o", ",".join(options), backing, mnt],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while not os.path.ismount(mnt):
            if process.poll() is not None:
                self.fail(f"appendonlyfs exited {process.returncode}: {process.stderr.read()}")
            self.assertLess(time.monotonic(), deadline, "the mount did not appear")
            time.sleep(0.01)

        def unmount():
            aofs._unmount(mnt)
            process.wait(timeout=10)
        self.addCleanup(unmount)
        os.chmod(mnt, 0o1777)  # a shared scratch directory, as /tmp is
        return backing, mnt

    def test_files_belong_to_their_creator_and_others_cannot_touch_them(self):
        with two_users.shared_root() as root:
            _, mnt = self.mount(root)
            secret = os.path.join(mnt, "victim.safetensors")
            made = two_users.python_as(self.victim, """
import os, sys
with open(sys.argv[1], "w") as f:
    f.write("victim's weights")
os.mkdir(sys.argv[1] + ".d", 0o777)
print(open(sys.argv[1]).read())
""", secret, umask=0o077)
            self.assertEqual(made.returncode, 0, made.stderr)
            self.assertEqual(made.stdout.strip(), "victim's weights", "the creator cannot read its file back")
            status = os.stat(secret)
            self.assertEqual((status.st_uid, status.st_gid), (self.victim.pw_uid, self.victim.pw_gid))
            self.assertEqual(stat.S_IMODE(status.st_mode), 0o600, "the mode is not the one asked, umask applied")
            self.assertEqual(stat.S_IMODE(os.stat(secret + ".d").st_mode), 0o700)
            self.assertEqual(os.stat(secret + ".d").st_uid, self.victim.pw_uid)
            for what, code in (
                    ("read", "open(sys.argv[1]).read()"),
                    ("append to", "open(sys.argv[1], 'a').write('attacker')"),
                    ("remove", "os.unlink(sys.argv[1])"),
                    ("rename", "os.rename(sys.argv[1], sys.argv[1] + '.mine')"),
                    ("chmod", "os.chmod(sys.argv[1], 0o666)"),
                    ("chown", f"os.chown(sys.argv[1], {self.attacker.pw_uid}, -1)")):
                tried = two_users.python_as(self.attacker, "import os, sys\n" + code, secret)
                self.assertNotEqual(tried.returncode, 0, f"the attacker could {what} the victim's 0600 file")
                self.assertIn("PermissionError", tried.stderr, f"{what}: {tried.stderr}")
            with open(secret) as f:
                self.assertEqual(f.read(), "victim's weights")
            self.assertEqual(stat.S_IMODE(os.stat(secret).st_mode), 0o600)
            # And the victim still owns, changes and removes it as on any file system.
            done = two_users.python_as(self.victim, "import os, sys; os.chmod(sys.argv[1], 0o640); os.unlink(sys.argv[1])",
                                       secret)
            self.assertEqual(done.returncode, 0, done.stderr)

    def test_a_spooled_0600_file_ends_0600_and_the_victims(self):
        # s3: no rename; the library writes the O_EXCL temporary file to its spool and uploads it at the
        # rename (safetensors' and torch's re-save).
        with two_users.shared_root() as root:
            _, mnt = self.mount(root, profile="s3")
            final = os.path.join(mnt, "model.safetensors")
            saved = two_users.python_as(self.victim, """
import os, sys, tempfile
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(sys.argv[1]), prefix=".tmp")
os.write(fd, b"victim's weights")
os.close(fd)
os.rename(tmp, sys.argv[1])
""", final, env={"LD_PRELOAD": LIBRARY, "APPENDGUARD": "1", "APPENDGUARD_SPOOL": "/tmp"})
            self.assertEqual(saved.returncode, 0, saved.stderr)
            status = os.stat(final)
            self.assertEqual(stat.S_IMODE(status.st_mode), 0o600, "the spooled file was widened")
            self.assertEqual(status.st_uid, self.victim.pw_uid)
            tried = two_users.python_as(self.attacker, "import sys; open(sys.argv[1]).read()", final)
            self.assertNotEqual(tried.returncode, 0, "the attacker read the victim's spooled 0600 file")

    def test_a_file_name_cannot_add_a_line_to_the_log(self):
        with two_users.shared_root() as root:
            log = os.path.join(root, "aofs.log")
            _, mnt = self.mount(root, log=log)
            name = "x\n* * * * * root evil.sh\nrefused write path=forged"
            tried = two_users.python_as(self.attacker, """
import os, sys
path = os.path.join(sys.argv[1], sys.argv[2])
with open(path, "w") as f:
    f.write("abcdefgh")
os.truncate(path, 2)   # hdfs: a truncation below the end is refused, and logged
""", mnt, name)
            self.assertNotEqual(tried.returncode, 0, "the refused truncation went through")
            with open(log) as f:
                lines = f.read().splitlines()
            self.assertTrue(lines, "nothing was logged")
            for line in lines:
                self.assertTrue(line.startswith(EVENTS), f"a log line of the attacker's: {line!r}")
            self.assertEqual(sum("forged" in line for line in lines), 1, lines)
            self.assertIn('path="/x\\n*', lines[0])


class LogFile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        aofs.skip_or_fail_without_fuse("the log tests")
        cls.attacker, _ = two_users.users()

    def test_a_log_name_the_attacker_linked_elsewhere_is_refused(self):
        with two_users.shared_root() as root:
            shared = os.path.join(root, "shared")
            os.mkdir(shared)
            os.chmod(shared, 0o777)  # writable by the attacker (no sticky bit: nothing else stops the link)
            secret = os.path.join(root, "crontab")
            with open(secret, "w") as f:
                f.write("# root only\n")
            os.chmod(secret, 0o600)
            log = os.path.join(shared, "aofs.log")
            planted = two_users.run_as(self.attacker, ["/bin/ln", "-s", secret, log])
            self.assertEqual(planted.returncode, 0, planted.stderr)
            backing = os.path.join(root, "backing")
            mnt = os.path.join(root, "mnt")
            os.mkdir(backing)
            os.mkdir(mnt)
            result = subprocess.run([APPENDONLYFS, "-f", "-o", f"profile=hdfs,log={log}", backing, mnt],
                                    capture_output=True, text=True, timeout=20)
            if os.path.ismount(mnt):
                aofs._unmount(mnt)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            self.assertIn("symbolic link", result.stderr)
            with open(secret) as f:
                self.assertEqual(f.read(), "# root only\n")

    def test_a_new_log_is_0600(self):
        with two_users.shared_root() as root:
            log = os.path.join(root, "aofs.log")
            with aofs.mounted(APPENDONLYFS, log=log) as (_, mnt):
                self.assertTrue(os.path.ismount(mnt))
            self.assertEqual(stat.S_IMODE(os.stat(log).st_mode), 0o600)


if __name__ == "__main__":
    unittest.main()
