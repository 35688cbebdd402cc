"""A store's refusal of a file the library does not guard is said once per file (issue 10, "failures the
library did not cause"): with APPENDGUARD_FS=none and a name no pattern matches, the program still gets
the store's errno, and one notice names the file, the call, the errno, why it was not guarded and the
settings that would guard it. A refusal on a local disk, or an errno no store gives, says nothing."""
import errno
import os
import unittest

import e2e_support
from e2e_support import PYTHON, MountTest, main, read_bytes
from rclone_mount import RCLONE, rclone_mounted

WRITER = r"""
import os, sys
path, count = sys.argv[1], int(sys.argv[2])
with open(path, "wb") as f:
    f.write(b"header")
for _ in range(count):
    fd = os.open(path, os.O_RDWR)     # on hdfs: a read stream, whose writes fail EOPNOTSUPP
    os.lseek(fd, 0, os.SEEK_END)
    try:
        os.write(fd, b"tensor")
        print("write=ok")
    except OSError as e:
        print("write=%d" % e.errno)
    os.close(fd)
"""

OPENER = r"""
import os, sys
path = sys.argv[1]
with open(path, "wb") as f:
    f.write(b"header")
try:
    os.close(os.open(path, os.O_WRONLY))  # on s3: an existing file needs O_TRUNC (EPERM)
    print("open=ok")
except OSError as e:
    print("open=%d" % e.errno)
"""

APPENDER = r"""
import os, sys
path = sys.argv[1]
with open(path, "wb") as f:   # one upload from offset 0: a write-once store takes it
    f.write(b"header")
fd = os.open(path, os.O_WRONLY | os.O_APPEND)  # rclone off: accepted, then the write and the close fail
try:
    os.write(fd, b"tensor")
    print("write=ok")
except OSError as e:
    print("write=%d" % e.errno)
try:
    os.close(fd)
    print("close=ok")
except OSError as e:
    print("close=%d" % e.errno)
"""


def notices(stderr):
    return [line for line in stderr.splitlines() if "; it is not guarded: " in line]


class UnguardedFailureTest(MountTest):
    def test_a_refused_write_on_an_unguarded_file_is_said_once(self):
        self.mount("hdfs")
        path = self.m("model.bin")
        proc = self.run_lib([PYTHON, "-c", WRITER, path, "3"], APPENDGUARD_FS="none")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.split(), [f"write={errno.EOPNOTSUPP}"] * 3)  # the store's errno, unchanged
        said = notices(proc.stderr)
        self.assertEqual(len(said), 1, proc.stderr)
        self.assertIn(f"write of {path} failed with EOPNOTSUPP on fuse.appendonlyfs mount {self.mnt}", said[0])
        self.assertIn("no pattern of APPENDGUARD_PATHS='*.safetensors' matches it", said[0])
        self.assertIn(f"APPENDGUARD_PATHS='*.safetensors:{self.mnt}/**' or APPENDGUARD_FS=fuse.appendonlyfs",
                      said[0])
        # The fix it names works: the same program then succeeds.
        proc = self.run_lib([PYTHON, "-c", WRITER, path, "1"], APPENDGUARD_FS="none",
                            APPENDGUARD_PATHS=f"*.safetensors:{self.mnt}/**")
        self.assertEqual(proc.stdout.split(), ["write=ok"], proc.stderr)
        self.assertEqual(notices(proc.stderr), [])

    def test_a_refused_open_on_an_unguarded_file_is_said(self):
        self.mount("s3")
        path = self.m("model.bin")
        proc = self.run_lib([PYTHON, "-c", OPENER, path], APPENDGUARD_FS="none")
        self.assertEqual(proc.stdout.split(), [f"open={errno.EPERM}"], proc.stderr)
        said = notices(proc.stderr)
        self.assertEqual(len(said), 1, proc.stderr)
        self.assertIn(f"open64 of {path} failed with EPERM on fuse.appendonlyfs mount {self.mnt}", said[0])

    def test_a_refused_close_on_an_unguarded_file_is_said(self):
        if RCLONE is None:
            self.fail("rclone is not installed (apt-get install rclone)")
        backing, mnt, _ = self.enterContext(rclone_mounted(self.dir, "off", on_mount=e2e_support.ACTIVE_MOUNTS.add))
        self.addCleanup(e2e_support.ACTIVE_MOUNTS.discard, mnt)
        path = os.path.join(mnt, "model.bin")
        proc = self.run_lib([PYTHON, "-c", APPENDER, path], APPENDGUARD_FS="none")
        self.assertEqual(proc.stdout.split(), [f"write={errno.ESPIPE}", f"close={errno.EPERM}"], proc.stderr)
        said = [line for line in proc.stderr.splitlines() if "close(fd " in line]
        self.assertEqual(len(said), 1, proc.stderr)
        self.assertIn("failed with EPERM on a descriptor appendguard does not guard", said[0])
        self.assertIn(f"fuse.rclone at {mnt}", said[0])
        self.assertIn("APPENDGUARD_FS=fuse", said[0])

    def test_a_guarded_open_the_store_refuses_is_said(self):
        # Issue 23: appendonlyfs strict refuses an O_TRUNC open of an existing non-empty file; the library
        # guards the mount and passes such an open on as asked, and used to say nothing of the EOPNOTSUPP.
        self.mount("strict")
        path = self.m("model.bin")
        code = ("import sys\n"
                "p = sys.argv[1]\n"
                "open(p, 'wb').write(b'old')\n"
                "for _ in range(2):\n"
                "    try:\n"
                "        open(p, 'wb').write(b'new')\n"
                "        print('overwrite=ok')\n"
                "    except OSError as e:\n"
                "        print('overwrite=%d' % e.errno)\n")
        proc = self.run_lib([PYTHON, "-c", code, path])
        self.assertEqual(proc.stdout.split(), [f"overwrite={errno.EOPNOTSUPP}"] * 2, proc.stderr)
        with open(self.b("model.bin"), "rb") as f:
            self.assertEqual(f.read(), b"old")
        said = [line for line in proc.stderr.splitlines() if line.startswith("appendguard:")]
        self.assertEqual(len(said), 1, proc.stderr)  # once per file
        self.assertIn(f'("{path}", O_WRONLY|O_CREAT|O_TRUNC', said[0])
        self.assertIn(f"failed with EOPNOTSUPP: the store (fuse.appendonlyfs at {self.mnt}) refused the open",
                      said[0])
        self.assertIn("write under a new name", said[0])

    def test_a_rename_the_store_refuses_is_said(self):
        # Issue 23: appendonlyfs s3 (mountpoint-s3's rules) refuses rename with ENOSYS; rsync and safetensors
        # 0.8 publish files by renaming a temporary one, and the library used to say nothing of it. Issue 26:
        # a file this process wrote is renamed by the library (copied on the store); one another process
        # wrote is still refused, and said.
        self.mount("s3")
        code = ("import os, sys\n"
                "d = sys.argv[1]\n"
                "if sys.argv[2] == 'write': open(os.path.join(d, 'f.tmp'), 'wb').write(b'new')\n"
                "try:\n"
                "    os.rename(os.path.join(d, 'f.tmp'), os.path.join(d, 'f'))\n"
                "    print('rename=ok')\n"
                "except OSError as e:\n"
                "    print('rename=%d' % e.errno)\n")
        self.assertOk(self.run_plain([PYTHON, "-c", "import sys; open(sys.argv[1], 'wb').write(b'old')",
                                      self.m("f.tmp")]))
        proc = self.run_lib([PYTHON, "-c", code, self.mnt, "rename"])
        self.assertEqual(proc.stdout.split(), [f"rename={errno.ENOSYS}"], proc.stderr)
        said = [line for line in proc.stderr.splitlines() if line.startswith("appendguard:")]
        self.assertEqual(len(said), 1, proc.stderr)
        self.assertIn(self.m("f.tmp"), said[0])
        self.assertIn("ENOSYS", said[0])
        self.assertIn("carries out the rename of a file this process wrote there", said[0])
        os.unlink(self.m("f.tmp"))
        proc = self.run_lib([PYTHON, "-c", code, self.mnt, "write"])
        self.assertEqual(proc.stdout.split(), ["rename=ok"], proc.stderr)
        self.assertEqual(notices(proc.stderr), [], proc.stderr)
        self.assertEqual(sorted(os.listdir(self.b(""))), ["f"])
        self.assertEqual(read_bytes(self.b("f")), b"new")

    def test_nothing_is_said_off_fuse_or_for_other_errors(self):
        path = self.path("local.bin")
        with open(path, "wb") as f:
            f.write(b"x")
        os.chmod(path, 0o444)
        # EBADF of a write on a read-only descriptor of a local file: not a store.
        code = "import os,sys\nfd=os.open(sys.argv[1], os.O_RDONLY)\ntry: os.write(fd, b'x')\nexcept OSError as e: print(e.errno)"
        proc = self.run_lib([PYTHON, "-c", code, path], APPENDGUARD_FS="none")
        self.assertEqual(proc.stdout.strip(), str(errno.EBADF))
        self.assertEqual(notices(proc.stderr), [], proc.stderr)


if __name__ == "__main__":
    main()
