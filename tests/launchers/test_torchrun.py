"""docs/launching.md's single-node torchrun recipe, run as written with 2 workers."""
from launchers_support import LauncherTest, main, recipe, substitute


class TorchrunTest(LauncherTest):
    def test_single_node(self):
        text = substitute(recipe("torchrun", 0), self.doc_replacements(("--nproc-per-node 8", "--nproc-per-node 2")))
        self.check_ranks(self.run_recipe(text))


if __name__ == "__main__":
    main(programs=("torchrun",))
