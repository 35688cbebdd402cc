"""safetensors 0.8 save_file and transformers save_pretrained (a tiny GPT-2 built from a config, no
download) on the hdfs profile. Their writer preallocates a `.tmpXXXXXX` sibling with ftruncate, which the
mount refuses: today they fail with Errno 95 with and without the library, and this test asserts exactly
that failure and its cause (the mount's refused truncate of the temporary file). On a local directory
they work under the library, and write what they write without it."""
from e2e_support import files_of, violations
from realclients_support import ClientTest, client, main

ERRNO_95 = "SafetensorError: Error while serializing: I/O error: Operation not supported (os error 95)"


class SafetensorsTest(ClientTest):
    def check_fails_on_preallocation(self, action, with_library):
        self.mount("hdfs")
        run = self.run_lib if with_library else self.run_plain
        proc = run(client(action, self.m("out")))
        self.assertFails(proc, 1)
        self.assertIn(ERRNO_95, proc.stderr)
        truncates = [line for line in self.log_lines() if line.startswith("refused truncate path=/out/.tmp")]
        self.assertEqual(len(truncates), 1, self.log_lines())
        self.assertIn("end=0 errno=EOPNOTSUPP profile=hdfs reason=non-zero", truncates[0])
        self.assertNotIn("model.safetensors", files_of(self.b("out")))

    def test_save_file_hdfs_without_library_fails_on_ftruncate(self):
        self.check_fails_on_preallocation("save_file", with_library=False)

    def test_save_file_hdfs_with_library_fails_on_ftruncate(self):
        self.check_fails_on_preallocation("save_file", with_library=True)

    def test_save_pretrained_hdfs_without_library_fails_on_ftruncate(self):
        self.check_fails_on_preallocation("save_pretrained", with_library=False)

    def test_save_pretrained_hdfs_with_library_fails_on_ftruncate(self):
        self.check_fails_on_preallocation("save_pretrained", with_library=True)

    def test_save_file_local_with_library_matches_local(self):
        out = self.path("out")
        proc = self.run_lib(client("save_file", out))
        self.assertOk(proc)
        self.assertEqual(violations(proc.stderr), [])
        self.assertTreesEqual(files_of(out), self.reference("save_file"))


if __name__ == "__main__":
    main()
