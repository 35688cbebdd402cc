"""docs/launching.md's recipes without a launcher of workers, run as written, once per rank (RANK=0 and
RANK=1 at once): mountpoint-s3 (appendonlyfs's s3 profile, no option), "Without the launcher"
(LD_PRELOAD on the hdfs profile) and "Before the cluster" (audit on a local folder, then the report)."""
import os

from launchers_support import LauncherTest, comparable, main, recipe, substitute
from e2e_support import files_of


class HdfsTest(LauncherTest):
    def test_without_the_launcher(self):
        text = substitute(recipe("Without the launcher"), self.doc_replacements()[1:])
        self.check_ranks(self.run_recipe(text, ranks=[0, 1]), logs=False)

    def test_before_the_cluster(self):
        run, report = [line for line in recipe("Before the cluster").splitlines() if line.strip()]
        local = self.path("ckpt")
        replacements = [("/tmp/audit-", f"{self.logs}/appendguard-audit-"), ("/tmp/ckpt", local)]
        proc = self.run_recipe(substitute(run, replacements[:1] + replacements[1:]) + "\n", ranks=[0, 1])
        self.assertOk(proc)
        for r in (0, 1):  # audit: the write at 0 goes through, and the files are those of a run without it
            self.assertIn(f"ok: rank {r} saved", proc.stdout)
        self.assertTreesEqual(comparable(files_of(local)), comparable(self.reference()))
        reported = self.run_recipe(substitute(report, replacements[:1]) + "\n")
        self.assertEqual(reported.returncode, 1, reported.stdout + reported.stderr)  # a write needs a code change
        self.assertIn("appendguard report: 2 violations in 1 group", reported.stdout)
        self.assertIn("ranks: 0,1", reported.stdout)
        self.assertIn("[fixed by enforce mode]", reported.stdout)  # the "r+b" reopen of the consolidation


class S3Test(LauncherTest):
    profile = "s3"

    def test_mountpoint_s3(self):
        text = substitute(recipe("mountpoint-s3"), [("/mnt/s3", self.mnt)])
        self.check_ranks(self.run_recipe(text, ranks=[0, 1]), logs=False)


if __name__ == "__main__":
    main()
