"""docs/launching.md's Ray recipes, run as written: ray_job.py (a local cluster started by ray.init(), 2
tasks) under `appendguard run`, and the same job with the variables given only in ray.init's runtime
environment (no launcher, no LD_PRELOAD in the job's own environment). Ray may kill a finished worker at
shutdown before it exits by itself: its exit summary line is then missing, so only the reports are
required in each rank's log."""
import os
import shutil
import tempfile

from launchers_support import LauncherTest, main, recipe, substitute


class RayTest(LauncherTest):
    def setUp(self):
        super().setUp()
        # Ray's session folder holds Unix sockets: a short path (the build tree's is too long for them).
        self.ray_tmp = tempfile.mkdtemp(prefix="agray-", dir="/tmp")
        self.addCleanup(shutil.rmtree, self.ray_tmp, True)

    def ray_env(self):
        return {"TMPDIR": self.ray_tmp, "RAY_TMPDIR": self.ray_tmp, "RAY_USAGE_STATS_ENABLED": "0"}

    def write_job(self, text):
        with open(os.path.join(self.work, "ray_job.py"), "w") as f:
            f.write(text)

    def test_appendguard_run_on_the_job(self):
        self.write_job(substitute(recipe("Ray", 0), self.doc_replacements()[1:2]))
        proc = self.run_recipe(substitute(recipe("Ray", 1), self.doc_replacements()[:1]), **self.ray_env())
        self.check_ranks(proc, summary=False)

    def test_runtime_env(self):
        init = recipe("Ray", 2).strip()
        job = substitute(recipe("Ray", 0), self.doc_replacements()[1:2] + [("ray.init()", init)])
        self.write_job(substitute(job, self.doc_replacements()[:1] + self.doc_replacements()[2:]))
        proc = self.run_recipe("python ray_job.py\n", **self.ray_env())
        self.check_ranks(proc, summary=False)


if __name__ == "__main__":
    main(modules=("ray",))
