"""PyTorch's distributed checkpoint with HuggingFace consolidation (torch 2.13), straight onto append-only
mounts: without the library it fails with Errno 95 (hdfs) or Errno 9 (s3); with APPENDGUARD=1 it succeeds,
the output loads with safetensors and equals the tensors saved (clients.py checks), consolidated bytes
identical to the same run on a local directory, and neither the library nor the mount reports anything."""
import os

from e2e_support import files_of, violations
from realclients_support import ClientTest, client, main

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

    def test_dcp_save_s3_with_library_default_reopen_fails_with_notice(self):
        self.mount("s3")
        proc = self.run_lib(client("dcp_save", self.m("out")))
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
