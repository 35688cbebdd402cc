"""rclone (Debian's: a cgo-linked Go program, whose file I/O is made by system calls of its own) copies a
folder onto appendonlyfs under APPENDGUARD_SYSCALLS=always, guarded by the raw-system-call layer: byte for
byte, on the hdfs and s3 profiles, several runs each (APPENDGUARD_GO_RUNS, 3 by default). Before the layer
kept SIGSYS out of Go's handler masks, every run was killed by SIGSYS at start-up.

Exits 77 (skip) without FUSE, unless APPENDGUARD_REQUIRE_FUSE=1."""
import os
import shutil
import unittest

import e2e_support
from e2e_support import files_of, harness

RUNS = int(os.environ.get("APPENDGUARD_GO_RUNS", "3"))


class GoRcloneCopyTest(e2e_support.MountTest):
    def source(self):
        source = self.path("source")
        os.makedirs(os.path.join(source, "shards"))
        for i in range(6):
            sub = "shards" if i % 2 else ""
            with open(os.path.join(source, sub, f"part{i}.safetensors"), "wb") as f:
                f.write(os.urandom(300_000 + 4099 * i))
        return source

    def copy_onto(self, profile):
        rclone = shutil.which("rclone")
        if not rclone:
            self.fail("rclone is not installed (scripts/lib/common.sh lists it)")
        source = self.source()
        expected = files_of(source)
        backing, mnt = self.mount(profile)
        for attempt in range(RUNS):
            dest = os.path.join(mnt, f"copy{attempt}")
            proc = self.run_lib([rclone, "copy", source, dest], timeout=120, APPENDGUARD_SYSCALLS="always",
                                APPENDGUARD_PATHS=os.path.join(mnt, "**"), APPENDGUARD_BACKTRACE="0",
                                RCLONE_CONFIG="/dev/null")
            self.assertEqual(proc.returncode, 0, f"run {attempt}: {proc.stderr[-3000:]}")
            self.assertNotIn("violation", proc.stderr)
            self.assertTreesEqual(files_of(os.path.join(backing, f"copy{attempt}")), expected)
        self.assertEqual(self.refused_writes(), [])

    def test_hdfs(self):
        self.copy_onto("hdfs")

    def test_s3(self):
        self.copy_onto("s3")


if __name__ == "__main__":
    e2e_support.main()
