"""docs/launching.md's DeepSpeed recipes, run as written on CPU with 2 processes: the single-node launcher
under `appendguard run`, and the multi-node one, whose only way of passing the library on is
~/.deepspeed_env, here through its OpenMPI runner on a hostfile naming localhost (pdsh and ssh are not
available here: --launcher openmpi --force_multi --no_ssh_check, as root --allow-run-as-root). That runner
gives the lines of .deepspeed_env to mpirun as -x NAME=VALUE; the launcher's own environment has no
LD_PRELOAD."""
import os

from launchers_support import LauncherTest, main, recipe, substitute

MULTI_NODE_HERE = ("--hostfile hosts --launcher openmpi --force_multi --no_ssh_check --master_addr 127.0.0.1 "
                   "--launcher_args '{}--mca btl_tcp_if_include lo'")


class DeepSpeedTest(LauncherTest):
    def test_single_node(self):
        text = substitute(recipe("DeepSpeed", 0), self.doc_replacements(("--num_gpus 8", "--num_gpus 2")))
        proc = self.run_recipe(text)
        self.check_ranks(proc)
        self.assertNotIn("appendguard run:", proc.stderr)

    def test_multi_node_with_deepspeed_env(self):
        with open(os.path.join(self.work, "hosts"), "w") as f:
            f.write("localhost slots=2\n")
        root = "--allow-run-as-root " if os.geteuid() == 0 else ""
        text = substitute(recipe("DeepSpeed", 1),
                          self.doc_replacements(("--hostfile hosts", MULTI_NODE_HERE.format(root))))
        proc = self.run_recipe(text)
        self.check_ranks(proc)
        with open(os.path.join(self.work, ".deepspeed_env")) as f:  # HOME is the working folder here
            self.assertIn(f"LD_PRELOAD={os.environ['APPENDGUARD_LIB']}\n", f.read())


if __name__ == "__main__":
    main(programs=("deepspeed", "mpirun"), modules=("deepspeed",))
