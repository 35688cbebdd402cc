"""Third adversarial round on a store (the rest is tests/integration/test_hostile_conditions.py): a file
spooled because the store has no rename (O_CREAT|O_EXCL on appendonlyfs's s3 profile) is uploaded when its
last descriptor goes, also when it goes without a close of the program's: close_range, closefrom, dup2
onto its number. Before, those left it in the spool: the name never reached the store (exit 0, no line).
Exits 77 (skip) without FUSE, unless APPENDGUARD_REQUIRE_FUSE=1 (CI).
"""
import os

import e2e_support
from e2e_support import harness, main, read_bytes, results


class SpooledFileGoneWithoutCloseTest(e2e_support.MountTest):
    def test_each_way_uploads_at_once(self):
        backing, mnt = self.mount("s3")
        for how in ("close", "close_range", "closefrom", "dup2"):
            with self.subTest(how=how):
                name = f"{how}.safetensors"
                proc = harness.run([harness.program("hostile"), "spool_gone", os.path.join(mnt, name), how],
                                   APPENDGUARD_BACKTRACE="0")
                self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
                r = results(proc.stdout)
                self.assertEqual(r["gone"], "0", proc.stdout + proc.stderr)
                self.assertEqual(r["size_after"], "10", proc.stdout + proc.stderr)  # on the store at once
                self.assertEqual(read_bytes(os.path.join(backing, name)), b"0123456789")

    def test_a_program_at_its_descriptor_limit_still_gets_its_spooled_file(self):
        # RLIMIT_NOFILE 32/32, every number taken when the spooled file closes: the upload's open of the
        # store file failed EMFILE, the close returned it, and the file (its spool gone) never reached the
        # store. Without the library the program's own descriptor was the file: nothing more to open.
        backing, mnt = self.mount("s3")
        proc = harness.run([harness.program("hostile"), "spool_at_limit", os.path.join(mnt, "limit.safetensors")],
                           APPENDGUARD_BACKTRACE="0")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        r = results(proc.stdout)
        self.assertEqual((r["write"], r["close"], r["size_after"]), ("10", "0", "10"), proc.stdout + proc.stderr)
        self.assertEqual(read_bytes(os.path.join(backing, "limit.safetensors")), b"0123456789")


if __name__ == "__main__":
    main()
