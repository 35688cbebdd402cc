"""`appendguard report`: what a second user can do to the page root writes and to what root reads.

- the page (`--html OUT`) is never written through a name the attacker planted in the output directory
  (a symlink to root's 0600 file, or a file of the attacker's own), and it ends root's, not the attacker's;
- a log the attacker wrote cannot forge violations, drive the terminal (ESC, BEL, direction overrides),
  or be cut short into "0 violations": a record that does not read is one line naming FILE:LINE, status 2.
"""
import json
import os
import stat
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import two_users  # noqa: E402

LAUNCHER = os.environ["APPENDGUARD_LAUNCHER"]
LIBRARY = os.environ["APPENDGUARD_LIB"]
FORGED = ("appendguard: violation: write /forged.safetensors fd=9 bytes=1 offset=0 end_of_file=9: refused "
          "(EOPNOTSUPP); pid 1 rank 0 host h")

# Run by the attacker under the library: a backward write from a Python function, and one from a native
# module; the file, function and module names carry a forged report line, ESC, BEL and a direction
# override.
HOSTILE_JOB = r"""
import ctypes, os, sys
directory, module, forged = sys.argv[1], sys.argv[2], sys.argv[3]
source = (
    "def save(path):\n"
    "    open(path, 'wb').write(b'abcdefgh')\n"
    "    f = open(path, 'r+b', buffering=0)\n"
    "    f.seek(0)\n"
    "    try:\n"
    "        f.write(b'x')\n"
    "        f.flush()\n"
    "    except OSError:\n"
    "        pass\n")
namespace = {}
exec(compile(source, "job.py\n" + forged + "\n\x1b]0;owned\x07\u202e", "exec"), namespace)
save = namespace["save"]
save.__code__ = save.__code__.replace(co_name="save\n" + forged + "\x1b[2J")
save(os.path.join(directory, "a.safetensors"))
ctypes.CDLL(module).backward_write(os.path.join(directory, "b.safetensors").encode())
"""
NATIVE_WRITER = r"""
#include <fcntl.h>
#include <unistd.h>
int backward_write(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (write(fd, "abcdefgh", 8) != 8) return -2;
  int result = (int)pwrite(fd, "x", 1, 0);
  close(fd);
  return result;
}
"""

VIOLATION = ("appendguard: violation: write /ckpt/a.safetensors fd=3 bytes=4 offset=0 end_of_file=8: refused "
             "(EOPNOTSUPP); pid 7 rank 0 host h\n  why: a write below the end\n")


def report(*args, **kwargs):
    return subprocess.run([LAUNCHER, "report", *args], capture_output=True, text=True, timeout=120, **kwargs)


class PlantedNames(unittest.TestCase):
    """Root publishes a page in a directory the attacker can write (a shared /tmp or log folder)."""

    def setUp(self):
        self.attacker, _ = two_users.users()

    def publish(self, root, mode):
        shared = os.path.join(root, "shared")
        os.mkdir(shared)
        os.chmod(shared, mode)
        secret_dir = os.path.join(root, "root-only")
        os.mkdir(secret_dir, 0o700)
        secret = os.path.join(secret_dir, "secret")
        with open(secret, "w") as f:
            f.write("root's secret\n")
        os.chmod(secret, 0o600)
        log = os.path.join(secret_dir, "run.log")
        with open(log, "w") as f:
            f.write(VIOLATION)
        return shared, secret, log

    def check_symlink_not_followed(self, mode):
        with two_users.shared_root() as root:
            shared, secret, log = self.publish(root, mode)
            page = os.path.join(shared, "page.html")
            # The attacker plants links at the names a writer could use: the fixed ".partial" sibling, the
            # page itself, and a few guesses.
            planted = two_users.python_as(self.attacker, """
import os, sys
shared, secret = sys.argv[1], sys.argv[2]
for name in ("page.html.partial", "page.html.tmp", ".page.html.partial", "page.html"):
    os.symlink(secret, os.path.join(shared, name))
""", shared, secret)
            self.assertEqual(planted.returncode, 0, planted.stderr)
            result = report("--html", page, log)
            with open(secret) as f:
                self.assertEqual(f.read(), "root's secret\n", "the page was written through the attacker's link")
            self.assertEqual(result.returncode, 1, result.stderr)
            status = os.lstat(page)
            self.assertTrue(stat.S_ISREG(status.st_mode), "the page is not a regular file (a planted link?)")
            self.assertEqual(status.st_uid, 0)
            with open(page) as f:
                self.assertIn("<html", f.read())
            for name in os.listdir(shared):  # the attacker's links stay as they were, nothing else is left
                self.assertTrue(name == "page.html" or os.path.islink(os.path.join(shared, name)), name)

    def test_a_link_planted_in_a_sticky_shared_directory_is_not_followed(self):
        self.check_symlink_not_followed(0o1777)

    def test_a_link_planted_in_a_group_writable_directory_is_not_followed(self):
        self.check_symlink_not_followed(0o777)

    def test_a_file_the_attacker_created_is_never_reused_for_the_page(self):
        with two_users.shared_root() as root:
            shared, _, log = self.publish(root, 0o1777)
            page = os.path.join(shared, "page.html")
            planted = two_users.python_as(self.attacker, """
import os, sys
for name in ("page.html.partial", ".page.html.partial"):
    fd = os.open(os.path.join(sys.argv[1], name), os.O_WRONLY | os.O_CREAT, 0o666)
    os.fchmod(fd, 0o666)
    os.close(fd)
""", shared)
            self.assertEqual(planted.returncode, 0, planted.stderr)
            result = report("--html", page, log)
            self.assertEqual(result.returncode, 1, result.stderr)
            status = os.lstat(page)
            self.assertEqual(status.st_uid, 0, "the page root published is the attacker's file")
            self.assertFalse(status.st_mode & 0o022, f"the page is writable by others: {oct(status.st_mode)}")
            # The attacker cannot change the page now that it is published.
            changed = two_users.python_as(self.attacker, "import sys; open(sys.argv[1], 'a').write('<script>')", page)
            self.assertNotEqual(changed.returncode, 0, "the attacker appended to root's page")
            with open(page) as f:
                self.assertNotIn("<script>", f.read())


class ForgedReports(unittest.TestCase):
    """The attacker names files, functions and modules; root reads the job's log."""

    def setUp(self):
        self.attacker, _ = two_users.users()

    def test_names_cannot_forge_a_report_or_reach_the_terminal(self):
        with two_users.shared_root() as root:
            work = os.path.join(root, "work")
            os.mkdir(work)
            os.chmod(work, 0o1777)
            source = os.path.join(root, "writer.c")
            with open(source, "w") as f:
                f.write(NATIVE_WRITER)
            module = os.path.join(work, "lib\n" + FORGED.replace("/", "") + "\x1b]0;x\x07.so")  # no / in a name
            subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", module, source], check=True)
            log = os.path.join(work, "job.log")
            job = two_users.python_as(self.attacker, HOSTILE_JOB, work, module, FORGED,
                                      env={"LD_PRELOAD": LIBRARY, "APPENDGUARD": "1", "APPENDGUARD_LOG": log,
                                           "APPENDGUARD_FORMAT": "text"})
            self.assertEqual(job.returncode, 0, job.stderr)
            with open(log, encoding="utf-8", errors="replace") as f:
                text = f.read()
            firsts = [line for line in text.splitlines() if line.startswith("appendguard: violation:")]
            self.assertEqual(len(firsts), 2, "\n".join(firsts))
            for bad in ("\x1b", "\x07", "\u202e"):
                self.assertNotIn(bad, text, f"{bad!r} is in the log raw")
            self.assertIn("save\\nappendguard: violation:", text)  # the name is there, escaped
            self.assertIn("lib\\nappendguard: violation:", text)
            result = report("--json", log)
            self.assertEqual(result.returncode, 1, result.stderr)
            self.assertEqual(json.loads(result.stdout)["violations"], 2, result.stdout)


class ForgedLogs(unittest.TestCase):
    """Root reads logs the attacker wrote: `appendguard report` must show them as written, no more."""

    def setUp(self):
        self.attacker, _ = two_users.users()

    def attacker_log(self, root, text):
        log = os.path.join(root, "attacker.log")
        wrote = two_users.python_as(self.attacker, "import sys; open(sys.argv[1], 'w').write(sys.argv[2])",
                                    log, text)
        self.assertEqual(wrote.returncode, 0, wrote.stderr)
        return log

    def test_a_json_record_cut_short_is_an_error_naming_its_line(self):
        with two_users.shared_root() as root:
            os.chmod(root, 0o1777)
            record = {"type": "violation", "operation": "write", "path": "/ckpt/a.safetensors", "fd": 3,
                      "end_of_file": 8, "outcome": "refused", "why": "below the end", "pid": 7, "rank": "0"}
            log = self.attacker_log(root, '{"type":"summary","pid":7}\n' + json.dumps(record)[:-1] + "\n")
            for args in ([log], ["--json", log], ["--html", os.path.join(root, "p.html"), log]):
                result = report(*args)
                self.assertEqual(result.returncode, 2, f"{args}: {result.stdout}{result.stderr}")
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                self.assertIn(f"{log}:2:", result.stderr)
                self.assertNotIn("0 violations", result.stdout)

    def test_a_text_report_line_that_does_not_read_is_an_error(self):
        with two_users.shared_root() as root:
            os.chmod(root, 0o1777)
            log = self.attacker_log(root, VIOLATION + "appendguard: violation: write\n")
            result = report(log)
            self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
            self.assertIn(f"{log}:3:", result.stderr)

    def test_control_bytes_and_direction_overrides_never_reach_the_terminal(self):
        hostile = "\x1b]0;owned\x07\x1b[2J\u202egnp.exe"
        with two_users.shared_root() as root:
            os.chmod(root, 0o1777)
            text = (f"appendguard: violation: {hostile} /ckpt/a fd=3 bytes=4 offset=0 end_of_file=8: refused "
                    f"(EOPNOTSUPP); pid 7 rank {hostile} host h\n  why: {hostile}\n"
                    f"  python stack (most recent call first):\n    File \"x.py\", line 1, in {hostile}\n")
            log = self.attacker_log(root, text)
            for args in ([log], ["--json", log]):
                result = report(*args)
                self.assertEqual(result.returncode, 1, result.stderr)
                for bad in ("\x1b", "\x07", "\u202e"):
                    self.assertNotIn(bad, result.stdout, f"{args}: {bad!r} reached the output")
            self.assertIn("\\x1b]0;owned\\x07", report(log).stdout)

    def test_a_rank_with_a_space_reads_one_way(self):
        with two_users.shared_root() as root:
            os.chmod(root, 0o1777)
            text = VIOLATION.replace("rank 0 host h", 'rank "0 host 9" host h')
            log = self.attacker_log(root, text)
            result = report("--json", log)
            self.assertEqual(result.returncode, 1, result.stderr)
            self.assertEqual(json.loads(result.stdout)["groups"][0]["ranks"], ["0 host 9"])


if __name__ == "__main__":
    unittest.main()
