"""PyTorch's distributed checkpoint with HuggingFace consolidation (torch 2.13), straight onto append-only
mounts: without the library it fails with Errno 95 (hdfs) or Errno 9 (s3); with APPENDGUARD=1 it succeeds,
the output loads with safetensors and equals the tensors saved (clients.py checks), consolidated bytes
identical to the same run on a local directory, and neither the library nor the mount reports anything.
On the write-once stores (appendonlyfs s3, rclone --vfs-cache-mode off) APPENDGUARD=1 alone holds each
output file's header session and reuses it for the tensors (issue 8): 4 output files, 4 threads."""
import os

import e2e_support
from e2e_support import files_of, violations
from rclone_mount import RCLONE, rclone_mounted
from realclients_support import ClientTest, client, main

CONSOLIDATED4 = {f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)} | {"model.safetensors.index.json"}

CONSOLIDATED = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                "model-00003-of-00003.safetensors", "model.safetensors.index.json"}


def consolidated(tree):
    """The consolidated output of a tree: DCP's own shards carry per-run metadata, the output must not."""
    return {name: data for name, data in tree.items() if os.path.basename(name) in CONSOLIDATED}


class DcpSaveTest(ClientTest):
    def check_fixed(self, profile, action, *inputs, **env):
        self.mount(profile)
        proc = self.run_lib(client(action, self.m("out"), *inputs), **env)
        self.assertOk(proc)
        self.assertEqual(violations(proc.stderr), [])
        self.assertNotIn("appendguard:", proc.stderr)
        written = files_of(self.b("out"))
        expected = self.reference(action, *inputs)
        self.assertEqual(sorted(written), sorted(expected), "different file names")
        self.assertTreesEqual(consolidated(written), consolidated(expected))
        self.assertNoMountRefusal()
        return written

    def check_fails(self, profile, errno_text, action, *inputs):
        self.mount(profile)
        proc = self.run_plain(client(action, self.m("out"), *inputs))
        self.assertFails(proc, 1)
        self.assertIn(errno_text, proc.stderr)
        # The mount refused the first tensor write after the "r+b" reopen of each consolidated file.
        refused = self.refused_writes()
        self.assertTrue(refused, self.log_lines())
        self.assertTrue(all(".safetensors offset=" in line for line in refused), refused)

    def test_dcp_save_hdfs_without_library_fails_errno_95(self):
        self.check_fails("hdfs", "OSError: [Errno 95] Operation not supported", "dcp_save")

    def test_dcp_save_hdfs_with_library_matches_local(self):
        written = self.check_fixed("hdfs", "dcp_save")
        self.assertTrue(CONSOLIDATED <= set(written), sorted(written))

    def test_dcp_save_s3_with_library_rewrite_matches_local(self):
        # The s3 profile (as mountpoint-s3) refuses every write open of an existing object without O_TRUNC.
        self.check_fixed("s3", "dcp_save", APPENDGUARD_REOPEN="rewrite")

    def test_dcp_save_s3_with_library_alone_matches_local(self):
        self.check_fixed("s3", "dcp_save")

    def test_consolidate_4_files_4_threads_s3_with_library_alone_matches_local(self):
        written = self.check_fixed("s3", "consolidate4", self.local_shards())
        self.assertEqual(set(written), CONSOLIDATED4)

    def test_consolidate_4_files_4_threads_rclone_cache_off_with_library_alone_matches_local(self):
        if RCLONE is None:
            self.fail("rclone is not installed (apt-get install rclone)")
        backing, mnt, log = self.enterContext(rclone_mounted(self.dir, "off", on_mount=e2e_support.ACTIVE_MOUNTS.add))
        self.addCleanup(e2e_support.ACTIVE_MOUNTS.discard, mnt)
        shards = self.local_shards()
        proc = self.run_lib(client("consolidate4", os.path.join(mnt, "out"), shards))
        self.assertOk(proc)
        self.assertNotIn("appendguard:", proc.stderr)
        written = files_of(os.path.join(backing, "out"))
        self.assertEqual(set(written), CONSOLIDATED4)
        self.assertTreesEqual(written, self.reference("consolidate4", shards))
        with open(log) as f:
            self.assertNotIn("ERROR", f.read())

    def test_dcp_save_s3_with_library_forced_append_reopen_fails_with_notice(self):
        self.mount("s3")
        proc = self.run_lib(client("dcp_save", self.m("out")), APPENDGUARD_REOPEN="append")
        self.assertFails(proc, 1)
        self.assertIn("PermissionError: [Errno 1] Operation not permitted", proc.stderr)
        notices = [line for line in proc.stderr.splitlines()
                   if line.startswith("appendguard: ") and "refused the open as rewritten" in line]
        self.assertTrue(notices, proc.stderr)
        self.assertIn("APPENDGUARD_REOPEN=rewrite", notices[0])

    def test_consolidate_existing_shards_hdfs_without_library_fails_errno_95(self):
        self.check_fails("hdfs", "OSError: [Errno 95] Operation not supported", "consolidate", self.local_shards())

    def test_consolidate_existing_shards_hdfs_with_library_matches_local(self):
        written = self.check_fixed("hdfs", "consolidate", self.local_shards())
        self.assertEqual(set(written), CONSOLIDATED)

    def test_two_gloo_ranks_consolidate_on_every_rank_hdfs_with_library(self):
        written = self.check_fixed("hdfs", "dcp_two_ranks")
        self.assertEqual({name for name in written if name.startswith("hf/")}, {f"hf/{n}" for n in CONSOLIDATED})
        self.assertEqual(len([name for name in written if name.startswith("shards/")]), 6)


if __name__ == "__main__":
    main()
