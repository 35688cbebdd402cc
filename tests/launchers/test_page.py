"""Every code block of docs/launching.md is either run by a launchers test or marked as not run by the
tests with the reason in its section. RECIPES below is the list: a new block on the page fails this test
until it is added here (and run, or its section says why it cannot be)."""
import os
import re
import sys
import unittest

from launchers_support import HERE, PAGE, blocks, sections

# (section, index of the code block in it) -> the test file that runs it, or None when not run (the section
# must then say "not run by the tests" and why).
RECIPES = {
    ("mountpoint-s3", 0): "test_plain.py",
    ("torchrun", 0): "test_torchrun.py",
    ("torchrun", 1): "test_torchrun.py",
    ("SLURM", 0): "test_slurm.py",
    ("SLURM", 1): "test_slurm.py",
    ("Open MPI", 0): "test_mpirun.py",
    ("Open MPI", 1): "test_mpirun.py",
    ("DeepSpeed", 0): "test_deepspeed.py",
    ("DeepSpeed", 1): "test_deepspeed.py",
    ("accelerate", 0): "test_accelerate.py",
    ("Ray", 0): "test_ray.py",
    ("Ray", 1): "test_ray.py",
    ("Ray", 2): "test_ray.py",
    ("Kubernetes", 0): None,  # no Kubernetes cluster
    ("Containers", 0): None,  # no container runtime
    ("Containers", 1): None,
    ("conda", 0): None,  # no conda
    ("Without the launcher", 0): "test_plain.py",
    ("Before the cluster", 0): "test_plain.py",
}


class PageTest(unittest.TestCase):
    def test_every_block_is_run_or_marked(self):
        found = {}
        for heading, body in sections():
            for index, _ in enumerate(blocks(body)):
                found[(heading, index)] = body
        self.assertEqual(sorted(found), sorted(RECIPES), "the page's code blocks and RECIPES differ")
        for (heading, index), test in RECIPES.items():
            body = found[(heading, index)]
            if test is None:
                self.assertRegex(body, r"(?i)not run by the tests", f"'## {heading}' block {index}: say why")
                continue
            with open(os.path.join(HERE, test)) as f:
                source = f.read()
            call = rf'recipe\("{re.escape(heading)}"' + (r"(, 0)?\)" if index == 0 else rf", {index}\)")
            self.assertRegex(source, call, f"{test} does not run '## {heading}' block {index}")
            self.assertIn("launchers." + test[len("test_"):-len(".py")], body,
                          f"'## {heading}' does not name the test that runs it")


if __name__ == "__main__":
    if not PAGE or not os.path.exists(PAGE):
        print("FAIL: APPENDGUARD_LAUNCHING_MD is not set; run through ctest", file=sys.stderr)
        sys.exit(1)
    unittest.main(verbosity=2)
