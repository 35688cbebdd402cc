"""docs/launching.md's torchrun recipes, run as written: single node with 2 workers, and multi-node as 2
"nodes" on this machine (the same command twice at once, one worker each, the c10d rendezvous on
127.0.0.1)."""
import socket

from launchers_support import LauncherTest, main, recipe, substitute


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TorchrunTest(LauncherTest):
    def test_single_node(self):
        text = substitute(recipe("torchrun", 0), self.doc_replacements(("--nproc-per-node 8", "--nproc-per-node 2")))
        self.check_ranks(self.run_recipe(text))

    def test_multi_node(self):
        text = substitute(recipe("torchrun", 1), self.doc_replacements(
            ("--nproc-per-node 8", "--nproc-per-node 1"), ("node0:29500", f"127.0.0.1:{free_port()}")))
        self.check_ranks(self.run_recipe(text, copies=2))


if __name__ == "__main__":
    main(programs=("torchrun",))
