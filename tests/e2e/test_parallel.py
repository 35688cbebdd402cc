"""Several writers at once on a live mount: 4 ranks x 2 files of the DCP pattern from Python
multiprocessing (RANK in the environment, spawn and fork), and the probe's 8 threads on 8 files."""
import os

from e2e_support import PYTHON, MountTest, e2e_script, files_of, harness, main, results, violations

RANKS = e2e_script("ranks_dcp.py")
RANK_ARGS = ["--ranks", "4", "--files-per-rank", "2", "--tensors", "4", "--tensor-bytes", "16384"]


def ranks(output_dir, *extra):
    return [PYTHON, RANKS, output_dir, *RANK_ARGS, *extra]


class RanksTest(MountTest):
    def reference(self):
        expected = self.local_reference(lambda d: ranks(d))
        self.assertEqual(len(expected), 9)  # 8 shards and the index JSON
        return expected

    def ranks_with_library(self, profile, start_method):
        self.mount(profile)
        proc = self.run_lib(ranks(self.m("out"), "--start-method", start_method))
        self.assertOk(proc)
        self.assertEqual(violations(proc.stderr), [])
        self.assertTreesEqual(files_of(self.b("out")), self.reference())
        self.assertNoMountRefusal()

    def test_hdfs_spawn_ranks_with_library_byte_identical(self):
        self.ranks_with_library("hdfs", "spawn")

    def test_hdfs_fork_ranks_with_library_byte_identical(self):
        self.ranks_with_library("hdfs", "fork")

    def test_strict_spawn_ranks_with_library_byte_identical(self):
        self.ranks_with_library("strict", "spawn")

    def test_hdfs_ranks_without_library_every_rank_fails(self):
        self.mount("hdfs")
        proc = self.run_plain(ranks(self.m("out")))
        self.assertFails(proc, 1)
        failures = sorted(line for line in proc.stderr.splitlines() if line.startswith("rank "))
        self.assertEqual(failures, [f"rank {r}: [Errno 95] Operation not supported" for r in range(4)])
        # Each rank dies on the first tensor of its first file: 4 refusals, 4 headers, no second files.
        self.assertEqual(len(self.refused_writes()), 4, self.log_lines())
        expected = self.reference()
        written = files_of(self.b("out"))
        self.assertEqual(len(written), 4)
        for name, data in written.items():
            header_size = 8 + int.from_bytes(expected[name][:8], "little")
            self.assertEqual(data, expected[name][:header_size])

    def bad_rank_refused_by_library(self, profile):
        self.mount(profile)
        proc = self.run_lib(ranks(self.m("out"), "--bad-rank", "2"))
        self.assertFails(proc, 1)
        self.assertIn("rank 2: [Errno 95] Operation not supported", proc.stderr.splitlines())
        lines = violations(proc.stderr)
        self.assertGreaterEqual(len(lines), 1, proc.stderr)
        for line in lines:
            self.assertIn(f"{self.m('out')}/model-00005-of-00008.safetensors fd=", line)
            self.assertIn("offset=8 end_of_file=", line)
        # Every shard, the bad rank's included, is complete and untouched; the index was not written.
        expected = self.reference()
        del expected["model.safetensors.index.json"]
        self.assertTreesEqual(files_of(self.b("out")), expected)
        self.assertNoMountRefusal()

    def test_hdfs_rank_rewriting_its_header_refused_by_library(self):
        self.bad_rank_refused_by_library("hdfs")

    def test_strict_rank_rewriting_its_header_refused_by_library(self):
        self.bad_rank_refused_by_library("strict")


class ThreadsTest(MountTest):
    """probe threads DIR: 8 threads, each O_RDWR|O_CREAT|O_TRUNC its own file, 500 x (lseek end, 4 KiB)."""

    def threads(self, profile, preload=True):
        self.mount(profile)
        os.mkdir(self.m("t"))
        argv = [harness.program("probe"), "threads", self.m("t")]
        proc = self.run_lib(argv) if preload else self.run_plain(argv)
        self.assertOk(proc)
        self.assertEqual(results(proc.stdout)["threads_failed"], "0")
        self.assertEqual(violations(proc.stderr), [])
        written = files_of(self.b("t"))
        self.assertEqual(sorted(written), [f"t{i}.safetensors" for i in range(8)])
        for i in range(8):
            expected = b"".join(bytes([ord("a") + (n + i) % 26]) * 4096 for n in range(500))
            self.assertTrue(written[f"t{i}.safetensors"] == expected, f"t{i}.safetensors differs")
        self.assertNoMountRefusal()

    def test_hdfs_eight_threads_with_library(self):
        self.threads("hdfs")

    def test_s3_eight_threads_with_library(self):
        self.threads("s3")

    def test_strict_eight_threads_with_library(self):
        self.threads("strict")


if __name__ == "__main__":
    main()
