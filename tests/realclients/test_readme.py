"""The README's PyTorch example, run as written (only /mnt/hdfs/run1 becomes a live hdfs-profile mount):
save.py through `appendguard run`, consolidate.py through LD_PRELOAD; both fail with Errno 95 without the
library. The consolidated files equal a run of the same script on a local directory."""
import os
import re
import shutil

from e2e_support import files_of, violations
from realclients_support import CLIENT_PYTHON, ClientTest, main

README = os.environ.get("APPENDGUARD_README", "")
LAUNCHER = os.environ.get("APPENDGUARD_LAUNCHER", "")
README_ROOT = "/mnt/hdfs/run1"
ERRNO_95 = "OSError: [Errno 95] Operation not supported"
CHECK = """import sys
from safetensors.torch import load_file
tensors = load_file(sys.argv[1])
print(sorted((name, tuple(t.shape), str(t.dtype)) for name, t in tensors.items()))"""


def readme_script(name):
    """The README's ```python block whose first line is `# NAME` (with an optional comment after ':')."""
    with open(README) as f:
        text = f.read()
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        first = block.splitlines()[0]
        if first == f"# {name}" or first.startswith(f"# {name}:"):
            return block
    raise AssertionError(f"README.md has no ```python block starting with '# {name}'")


class ReadmeExampleTest(ClientTest):
    def script(self, name, root, readme_name=None):
        """The README's script `readme_name` (default: name) with /mnt/hdfs/run1 replaced by root."""
        source = readme_script(readme_name or name)
        self.assertIn(README_ROOT, source)
        path = self.path(name)
        with open(path, "w") as f:
            f.write(source.replace(README_ROOT, root))
        return path

    def loaded(self, safetensors_file):
        proc = self.run_plain([CLIENT_PYTHON, "-c", CHECK, safetensors_file])
        self.assertOk(proc)
        return proc.stdout.strip()

    def test_save_py_through_the_launcher(self):
        self.mount("hdfs")
        plain = self.run_plain([CLIENT_PYTHON, self.script("plain-save.py", self.m("plain"), "save.py")])
        self.assertFails(plain, 1)
        self.assertIn(ERRNO_95, plain.stderr)

        refusals_before = len(self.log_lines())
        launched = self.run_plain([LAUNCHER, "run", "--", CLIENT_PYTHON, self.script("save.py", self.m("run1"))])
        self.assertOk(launched)
        self.assertEqual(violations(launched.stderr), [])
        consolidated = self.b("run1/hf/model-00001-of-00001.safetensors")
        self.assertEqual(self.loaded(consolidated),
                         "[('embed.weight', (1000, 64), 'torch.float32'), ('head.weight', (64, 1000), 'torch.float32')]")
        self.assertEqual(self.log_lines()[refusals_before:], [], "the mount refused the guarded run")

    def test_consolidate_py_through_ld_preload(self):
        local_root = self.path("local-run1")
        shutil.copytree(self.local_shards(), os.path.join(local_root, "dcp"))
        self.assertOk(self.run_plain([CLIENT_PYTHON, self.script("local-consolidate.py", local_root, "consolidate.py")]))
        expected = files_of(os.path.join(local_root, "hf-from-shards"))
        self.assertEqual(sorted(expected), ["model-00001-of-00001.safetensors", "model.safetensors.index.json"])

        self.mount("hdfs")
        for root in ("plain", "run1"):
            shutil.copytree(self.local_shards(), self.b(f"{root}/dcp"))
        plain = self.run_plain([CLIENT_PYTHON, self.script("plain-consolidate.py", self.m("plain"), "consolidate.py")])
        self.assertFails(plain, 1)
        self.assertIn(ERRNO_95, plain.stderr)

        refusals_before = len(self.log_lines())
        preloaded = self.run_lib([CLIENT_PYTHON, self.script("consolidate.py", self.m("run1"))])
        self.assertOk(preloaded)
        self.assertEqual(violations(preloaded.stderr), [])
        self.assertTreesEqual(files_of(self.b("run1/hf-from-shards")), expected)
        self.assertEqual(self.log_lines()[refusals_before:], [], "the mount refused the guarded run")


if __name__ == "__main__":
    main()
