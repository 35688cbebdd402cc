"""Whole-mount guarding and deferred preallocation on a live appendonlyfs mount, with only APPENDGUARD=1:
a file whose name no pattern matches (data.bin) is guarded because the mount is append-only; its
ftruncate preallocation never reaches the mount, and what the program did not write is filled with zeros
at close (or at exit), as a local disk would hold it. APPENDGUARD_FS=none guards by name only again."""
from harness import program, read_bytes, results
from e2e_support import MountTest, main, violations

EXPECTED = b"x" * 300 + b"\0" * 700


class WholeMountTest(MountTest):
    def prealloc(self, runner, name, ending="close", **env):
        proc = runner([program("probe"), "prealloc", self.m(name), ending], **env)
        self.assertOk(proc)
        return results(proc.stdout), proc.stderr

    def test_unmatched_name_on_append_only_mount_is_guarded_and_zero_filled(self):
        self.mount("hdfs")
        for ending in ("close", "exit"):
            with self.subTest(ending=ending):
                r, err = self.prealloc(self.run_lib, f"data-{ending}.bin", ending)
                self.assertEqual(r["ftruncate_grow"], "0")
                self.assertEqual(r["seek_end"], "1000")
                self.assertEqual(r["write"], "300")
                self.assertEqual(r["ftruncate_cut"], "-1 errno=EOPNOTSUPP")
                self.assertEqual(r["write_past_end"], "-1 errno=EOPNOTSUPP")
                self.assertEqual(len(violations(err)), 2, err)
                self.assertEqual(read_bytes(self.b(f"data-{ending}.bin")), EXPECTED)
        self.assertNoMountRefusal()

    def test_without_library_the_mount_refuses_the_preallocation(self):
        self.mount("hdfs")
        r, _ = self.prealloc(self.run_plain, "data.bin")
        self.assertEqual(r["ftruncate_grow"], "-1 errno=EOPNOTSUPP")
        self.assertTrue(any(line.startswith("refused truncate path=/data.bin") for line in self.log_lines()),
                        self.log_lines())

    def test_by_name_only_leaves_the_file_unguarded(self):
        self.mount("hdfs")
        r, err = self.prealloc(self.run_lib, "data.bin", APPENDGUARD_FS="none")
        self.assertEqual(r["ftruncate_grow"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(violations(err), [])
        self.assertTrue(any(line.startswith("refused truncate path=/data.bin") for line in self.log_lines()))


if __name__ == "__main__":
    main()
