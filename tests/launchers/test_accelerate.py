"""docs/launching.md's accelerate recipe, run as written with 2 CPU processes."""
from launchers_support import LauncherTest, main, recipe, substitute


class AccelerateTest(LauncherTest):
    def test_accelerate_launch(self):
        text = substitute(recipe("accelerate"), self.doc_replacements(("--num_processes 8", "--num_processes 2")))
        proc = self.run_recipe(text)
        self.check_ranks(proc)
        self.assertNotIn("appendguard run:", proc.stderr)  # it passes the environment on: no warning


if __name__ == "__main__":
    main(programs=("accelerate",), modules=("accelerate",))
