"""safetensors 0.8 save_file and transformers save_pretrained (a tiny GPT-2 built from a config, no
download, in four shards) on the hdfs profile. Their writer creates a `.tmpXXXXXX` sibling O_RDWR,
preallocates it with ftruncate, writes it from offset 0, renames it onto the target (a raw syscall) and
closes it. Without the library the mount refuses the ftruncate (Errno 95, as users report). With only
APPENDGUARD=1 the temporary file is guarded because it is on an append-only mount (APPENDGUARD_FS), the
preallocation is deferred, and the files equal a local run byte for byte. APPENDGUARD_PREALLOC=refuse and
APPENDGUARD_FS=none bring the failure back, each for its own reason."""
import os

from e2e_support import files_of, violations
from realclients_support import ClientTest, client, main

ERRNO_95 = "SafetensorError: Error while serializing: I/O error: Operation not supported (os error 95)"


class SafetensorsTest(ClientTest):
    def check_fails_on_preallocation(self, action, **env):
        self.mount("hdfs")
        run = self.run_lib if env else self.run_plain
        proc = run(client(action, self.m("out")), **env)
        self.assertFails(proc, 1)
        self.assertIn(ERRNO_95, proc.stderr)
        self.assertNotIn("model.safetensors", files_of(self.b("out")))
        return proc

    def check_works(self, action, **env):
        self.mount("hdfs")
        proc = self.run_lib(client(action, self.m("out")), **env)
        self.assertOk(proc)
        self.assertEqual(violations(proc.stderr), [])
        self.assertTreesEqual(files_of(self.b("out")), self.reference(action))
        self.assertNoMountRefusal()
        return proc

    def assert_mount_refused_truncate(self):
        truncates = [line for line in self.log_lines() if line.startswith("refused truncate path=/out/.tmp")]
        self.assertEqual(len(truncates), 1, self.log_lines())
        self.assertIn("end=0 errno=EOPNOTSUPP profile=hdfs reason=non-zero", truncates[0])

    def test_save_file_hdfs_without_library_fails_on_ftruncate(self):
        self.check_fails_on_preallocation("save_file")
        self.assert_mount_refused_truncate()

    def test_save_pretrained_hdfs_without_library_fails_on_ftruncate(self):
        self.check_fails_on_preallocation("save_pretrained")
        self.assert_mount_refused_truncate()

    def test_save_file_hdfs_with_library_works(self):
        proc = self.check_works("save_file", APPENDGUARD_TRACE="1")
        deferred = [line for line in proc.stderr.splitlines()
                    if "ftruncate64" in line and "/out/.tmp" in line and "(deferred: not sent)" in line]
        self.assertEqual(len(deferred), 1, proc.stderr[-3000:])

    def test_save_pretrained_sharded_hdfs_with_library_works(self):
        self.check_works("save_pretrained")

    def test_save_file_hdfs_prealloc_refuse_is_refused_by_the_library(self):
        proc = self.check_fails_on_preallocation("save_file", APPENDGUARD_PREALLOC="refuse")
        self.assertEqual(len(violations(proc.stderr)), 1, proc.stderr)
        self.assertIn("ftruncate64", violations(proc.stderr)[0])
        self.assertEqual(self.log_lines(), [], "the library refused the ftruncate before the mount saw it")

    def test_save_file_hdfs_by_name_only_fails_on_ftruncate(self):
        self.check_fails_on_preallocation("save_file", APPENDGUARD_FS="none")
        self.assert_mount_refused_truncate()

    def test_save_file_over_an_existing_file_fails_on_rename_like_fuse_dfs(self):
        # fuse_dfs cannot rename onto an existing file, and safetensors' rename is a raw system call that
        # no preload library sees: a second save into the same directory fails with EIO (docs/stores.md).
        self.check_works("save_file")
        proc = self.run_lib(client("save_file", self.m("out")))
        self.assertFails(proc, 1)
        self.assertIn("I/O error: Input/output error (os error 5)", proc.stderr)
        renames = [line for line in self.log_lines() if line.startswith("refused rename path=/out/.tmp")]
        self.assertEqual(len(renames), 1, self.log_lines())
        self.assertIn("to=/out/model.safetensors errno=EIO profile=hdfs reason=destination-exists", renames[0])
        self.assertTreesEqual(files_of(self.b("out")), self.reference("save_file"))  # the first save is intact

    def test_save_file_local_with_library_matches_local(self):
        out = self.path("out")
        proc = self.run_lib(client("save_file", out), APPENDGUARD_TRACE="1")
        self.assertOk(proc)
        self.assertEqual(violations(proc.stderr), [])
        # The temporary file itself is not guarded on a local disk (not by the mount rule, not by name):
        # none of its opens or writes is traced. Its raw rename onto the guarded model.safetensors is
        # (trapped while the O_EXCL descriptor is open, shim/syscall_dispatch.cpp).
        traced_tmp = [line for line in proc.stderr.splitlines() if "/.tmp" in line and " renameat " not in line]
        self.assertEqual(traced_tmp, [], "a local disk is not guarded by the mount rule")
        renames = [line for line in proc.stderr.splitlines() if " renameat " in line and "/.tmp" in line]
        self.assertEqual(len(renames), 1, proc.stderr)
        self.assertIn("to " + os.path.join(out, "model.safetensors"), renames[0])
        self.assertIn("(raw system call) -> 0", renames[0])
        self.assertTreesEqual(files_of(out), self.reference("save_file"))


if __name__ == "__main__":
    main()
