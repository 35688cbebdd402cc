"""docs/launching.md's single-node DeepSpeed recipe, run as written on CPU with 2 processes."""
from launchers_support import LauncherTest, main, recipe, substitute


class DeepSpeedTest(LauncherTest):
    def test_single_node(self):
        text = substitute(recipe("DeepSpeed", 0), self.doc_replacements(("--num_gpus 8", "--num_gpus 2")))
        proc = self.run_recipe(text)
        self.check_ranks(proc)
        self.assertNotIn("appendguard run:", proc.stderr)


if __name__ == "__main__":
    main(programs=("deepspeed",), modules=("deepspeed",))
