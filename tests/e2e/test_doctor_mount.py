"""`appendguard doctor DIR` on live appendonlyfs mounts: the mount named from /proc/self/mountinfo, the
probe of each rule as the profile answers it, and the settings recommended (rewrite for the s3 profile,
which refuses appends)."""
import os
import subprocess

import harness
from e2e_support import MountTest, main

# The launcher beside the library in the build tree (build/src/shim -> build/src/cli).
LAUNCHER = os.path.join(os.path.dirname(os.path.dirname(harness.LIB)), "cli", "appendguard")


def rule_line(out, rule):
    for line in out.splitlines():
        if line.strip().startswith(rule):
            return line
    return ""


class DoctorMountTest(MountTest):
    def doctor(self, directory):
        env = harness.child_env(mode=None, preload=False)
        return subprocess.run([LAUNCHER, "doctor", directory], env=env, capture_output=True, text=True, timeout=60)

    def test_hdfs_profile(self):
        _, mnt = self.mount("hdfs")
        proc = self.doctor(mnt)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn(f"mount:          {mnt}: type fuse.appendonlyfs", proc.stdout)
        self.assertIn("every file written here is guarded", proc.stdout)
        self.assertIn("accepted", rule_line(proc.stdout, "append to an existing file"))
        below = rule_line(proc.stdout, "write below the end")
        self.assertIn("refused (EOPNOTSUPP", below)
        self.assertIn("needs a code change", below)
        self.assertIn("works (rewritten to an append open", rule_line(proc.stdout, "read-write open"))
        self.assertIn("APPENDGUARD=audit on a local disk first", proc.stdout)
        self.assertEqual([n for n in os.listdir(mnt) if n.startswith(".appendguard-doctor")], [])

    def test_s3_profile_recommends_rewrite(self):
        _, mnt = self.mount("s3")
        proc = self.doctor(mnt)
        self.assertIn("refused", rule_line(proc.stdout, "append to an existing file"), proc.stdout)
        self.assertIn("APPENDGUARD_REOPEN=rewrite", rule_line(proc.stdout, "read-write open"))
        self.assertIn("- APPENDGUARD_REOPEN=rewrite", proc.stdout)

    def test_plain_directory(self):
        proc = self.doctor(self.dir)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("only files that APPENDGUARD_PATHS names are guarded here", proc.stdout)
        self.assertIn("accepts every write: the library is not needed here", proc.stdout)
        self.assertEqual(os.listdir(self.dir), [])


if __name__ == "__main__":
    main()
