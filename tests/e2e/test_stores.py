"""docs/stores.md cannot rot: runs tests/e2e/scripts/store_probe.py on every store of its table that
this machine has (each appendonlyfs profile, a kernel append-only file on a tmpfs, rclone in three cache
modes) and checks that the table's row says what the probe printed, cell for cell. Rows taken from other
stores' sources (fuse_dfs, mountpoint-s3, s3fs) are listed in FROM_SOURCES; any other row fails.

Without FUSE the script exits 77 (skip). A store whose tool is missing (rclone; root, chattr for the
tmpfs) skips its own case, unless APPENDGUARD_REQUIRE_FUSE=1, which makes it a failure.
"""
import errno
import os
import re
import unittest

import e2e_support
from e2e_support import AOFS, PYTHON, aofs, e2e_script, harness
from rclone_mount import RCLONE, rclone_mounted
from tmpfs_append_only import missing_prerequisite, tmpfs_mounted

DOC = os.path.join(e2e_support.ROOT, "..", "docs", "stores.md")
PROBE = e2e_script("store_probe.py")
OPERATIONS = ["open_rdwr_existing", "open_wronly_existing", "open_append_existing", "write_not_at_end",
              "truncate", "fallocate", "rename", "rename_onto_existing"]
APPENDONLYFS = {  # row label -> mount options
    "appendonlyfs `profile=hdfs`": ("hdfs", ()),
    "appendonlyfs `profile=hdfs,hdfs_open=translate`": ("hdfs", ("hdfs_open=translate",)),
    "appendonlyfs `profile=hdfs,truncate=ignore`": ("hdfs", ("truncate=ignore",)),
    "appendonlyfs `profile=s3`": ("s3", ()),
    "appendonlyfs `profile=strict`": ("strict", ()),
    "appendonlyfs `profile=volumes`": ("volumes", ()),
}
CHATTR = "`chattr +a` file (tmpfs)"
RCLONE_ROWS = {  # row label -> (cache mode, more arguments)
    "rclone `--vfs-cache-mode off`": ("off", ()),
    "rclone `--vfs-cache-mode minimal --vfs-write-back 0s`": ("minimal", ("--vfs-write-back", "0s")),
    "rclone `--vfs-cache-mode writes --vfs-write-back 0s`": ("writes", ("--vfs-write-back", "0s")),
    "rclone `--vfs-cache-mode writes` (write-back after 5 s)": ("writes", ()),
}
FROM_SOURCES = {"fuse_dfs (Apache Hadoop trunk, from source)",
                "mountpoint-s3, general purpose bucket, `--allow-overwrite` (from source)",
                "mountpoint-s3, S3 Express One Zone, `--allow-overwrite --incremental-upload` (from source)",
                "s3fs (from its documentation)"}


def doc_table():
    """{store label: [cell per operation]} from the table of docs/stores.md whose header starts | Store |."""
    with open(DOC) as f:
        lines = [line.rstrip("\n") for line in f]
    start = next(i for i, line in enumerate(lines) if line.startswith("| Store |"))
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = [cell.replace("`", "") for cell in cells[1:1 + len(OPERATIONS)]]
    return rows


def required():
    return os.environ.get("APPENDGUARD_REQUIRE_FUSE") == "1"


class StoresTableTest(harness.TempDirTest):
    @classmethod
    def setUpClass(cls):
        cls.table = doc_table()

    def probe(self, directory, *flags):
        proc = harness.run([PYTHON, PROBE, *flags, directory], mode=None, preload=False)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = dict(line.split("=", 1) for line in proc.stdout.splitlines())
        self.assertEqual(list(out), OPERATIONS)
        return [out[name] for name in OPERATIONS]

    def check_row(self, label, measured):
        self.assertIn(label, self.table, f"docs/stores.md has no row {label!r}")
        documented = self.table[label]
        for name, doc_cell, cell in zip(OPERATIONS, documented, measured):
            self.assertEqual(doc_cell, cell, f"docs/stores.md, row {label!r}, column {name}: measured {cell!r}")

    def missing(self, why):
        if required():
            self.fail(f"{why} and APPENDGUARD_REQUIRE_FUSE=1")
        self.skipTest(why)

    def test_every_row_is_measured_here_or_from_sources(self):
        measured = set(APPENDONLYFS) | {CHATTR} | set(RCLONE_ROWS)
        self.assertEqual(set(self.table) - measured - FROM_SOURCES, set(), "rows nobody checks")
        self.assertEqual(measured - set(self.table), set(), "measured stores missing from docs/stores.md")

    def test_appendonlyfs_profiles(self):
        for label, (profile, options) in APPENDONLYFS.items():
            with self.subTest(label):
                with aofs.mounted(AOFS, profile=profile, options=options) as (_, mount_dir):
                    self.check_row(label, self.probe(mount_dir))

    def test_kernel_append_only_file(self):
        why = missing_prerequisite()
        if why:
            self.missing(why)
        directory = self.path("tmpfs")
        os.mkdir(directory)
        with tmpfs_mounted(directory):
            self.check_row(CHATTR, self.probe(directory, "--append-only"))
        self.assertFalse(os.path.ismount(directory))

    def test_rclone(self):
        if RCLONE is None:
            self.missing("rclone is not installed")
        for label, (mode, args) in RCLONE_ROWS.items():
            with self.subTest(label):
                context = rclone_mounted(self.dir, mode, extra_args=args, on_mount=e2e_support.ACTIVE_MOUNTS.add)
                with context as (_, mount_dir, _):
                    try:
                        self.check_row(label, self.probe(mount_dir))
                    finally:
                        e2e_support.ACTIVE_MOUNTS.discard(mount_dir)

    def test_errno_names_in_the_table_exist(self):
        for label, cells in self.table.items():
            for cell in cells:
                for name in re.findall(r"\bE[A-Z0-9]+\b", cell):
                    self.assertTrue(hasattr(errno, name), f"{label}: {name}")


if __name__ == "__main__":
    e2e_support.main()
