"""docs/launching.md's Open MPI recipes, run as written with mpirun -np 2 on this machine (as root with
--allow-run-as-root): the -x exports, and `appendguard run` on each rank. Then `appendguard run -- mpirun`
without -x: it works on one node, and the launcher says in one line what -x to add."""
import os

from launchers_support import LauncherTest, main, recipe, substitute

ALLOW_ROOT = "--allow-run-as-root " if os.geteuid() == 0 else ""


class MpirunTest(LauncherTest):
    def counts(self):
        return ("mpirun -np 16", f"mpirun {ALLOW_ROOT}-np 2")

    def test_x_exports(self):
        proc = self.run_recipe(substitute(recipe("Open MPI", 0), self.doc_replacements(self.counts())))
        self.check_ranks(proc)

    def test_launcher_on_each_rank(self):
        proc = self.run_recipe(substitute(recipe("Open MPI", 1), self.doc_replacements(self.counts())))
        self.check_ranks(proc)

    def test_control_without_the_library(self):
        # What every recipe's check stands against: the same ranks without the library fail on this mount
        # (PyTorch's "r+b" reopen for consolidation gets Errno 95), and no rank leaves a log.
        proc = self.run_recipe(f"mpirun {ALLOW_ROOT}-np 2 python train.py --save-dir {self.root}\n")
        self.assertNotEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("[Errno 95] Operation not supported", proc.stderr)
        self.assertEqual(os.listdir(self.logs), [])

    def test_warning_without_x(self):
        proc = self.run_recipe(f"appendguard run --log '{self.logs}/appendguard-%h-%r-%p.log' -- "
                               f"mpirun {ALLOW_ROOT}-np 2 python train.py --save-dir {self.root}\n")
        self.check_ranks(proc)  # one node: the local ranks inherit mpirun's environment
        warnings = [line for line in proc.stderr.splitlines() if line.startswith("appendguard run: warning: Open MPI")]
        self.assertEqual(len(warnings), 1, proc.stderr)
        self.assertIn("add -x LD_PRELOAD -x APPENDGUARD -x APPENDGUARD_LOG", warnings[0])


if __name__ == "__main__":
    main(programs=("mpirun",))
