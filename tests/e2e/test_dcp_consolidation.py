"""The PyTorch 2.9+ DCP consolidation pattern (tests/integration/scripts/dcp_consolidate.py) on a live
appendonlyfs mount: the bug reproduces without the library, and with APPENDGUARD=1 the output is byte
for byte what the same script writes on a local directory."""
import unittest

from e2e_support import DCP, PYTHON, MountTest, files_of, main, violations

ARGS = ["--files", "3", "--tensors", "4", "--tensor-bytes", "16384", "--workers", "3"]
HEADER_NAME = "model-00001-of-00003.safetensors"


def dcp(output_dir):
    return [PYTHON, DCP, output_dir, *ARGS]


class DcpConsolidationTest(MountTest):
    def reference(self):
        expected = self.local_reference(dcp)
        self.assertEqual(len(expected), 4)  # three shards and the index JSON
        self.assertIn("model.safetensors.index.json", expected)
        return expected

    def check_bug_reproduces(self, profile, errno_text, log_errno):
        self.mount(profile)
        proc = self.run_plain(dcp(self.m("out")))
        self.assertFails(proc, 1)
        self.assertIn(f"dcp_consolidate: {errno_text}", proc.stderr)
        expected = self.reference()
        written = files_of(self.b("out"))
        self.assertNotIn("model.safetensors.index.json", written)  # the script died before the index
        self.assertEqual(len(written), 3)
        refused = self.refused_writes()
        self.assertEqual(len(refused), 3, self.log_lines())  # one per shard: its first tensor write
        for name, data in written.items():
            # Only the header reached the store: it is the intact first part of the good file.
            header_size = 8 + int.from_bytes(expected[name][:8], "little")
            self.assertEqual(data, expected[name][:header_size], name)
            self.assertTrue(any(f"path=/out/{name} offset={header_size} " in line and f"end={header_size} " in line
                                and f"errno={log_errno} profile={profile} reason=read-handle" in line
                                for line in refused), (name, refused))

    def check_library_fixes_it(self, profile, options=(), **env):
        self.mount(profile, options=options)
        proc = self.run_lib(dcp(self.m("out")), **env)
        self.assertOk(proc)
        self.assertEqual(violations(proc.stderr), [])
        self.assertTreesEqual(files_of(self.b("out")), self.reference())
        self.assertNoMountRefusal()

    def test_hdfs_without_library_fails_eopnotsupp(self):
        self.check_bug_reproduces("hdfs", "[Errno 95] Operation not supported", "EOPNOTSUPP")

    def test_s3_without_library_fails_ebadf(self):
        self.check_bug_reproduces("s3", "[Errno 9] Bad file descriptor", "EBADF")

    def test_strict_without_library_succeeds(self):
        # strict allows O_RDWR on an existing file as long as every write appends, which this pattern does.
        self.mount("strict")
        proc = self.run_plain(dcp(self.m("out")))
        self.assertOk(proc)
        self.assertTreesEqual(files_of(self.b("out")), self.reference())
        self.assertNoMountRefusal()

    def test_hdfs_with_library_is_byte_identical_to_local(self):
        self.check_library_fixes_it("hdfs")

    def test_hdfs_translated_open_flags_with_library_is_byte_identical_to_local(self):
        self.check_library_fixes_it("hdfs", options=("hdfs_open=translate",))

    def test_strict_with_library_is_byte_identical_to_local(self):
        self.check_library_fixes_it("strict")

    # Mountpoint for S3 (and the s3 profile) refuses every write open of an existing object without
    # O_TRUNC: the default append reopen cannot work there (docs/limits.md). What must hold is that the
    # failure is explained and nothing misplaced reaches the store; APPENDGUARD_REOPEN=rewrite fixes it.
    def test_s3_with_library_and_rewrite_reopen_is_byte_identical_to_local(self):
        self.check_library_fixes_it("s3", APPENDGUARD_REOPEN="rewrite")

    def test_hdfs_with_rewrite_reopen_is_byte_identical_to_local(self):
        self.check_library_fixes_it("hdfs", APPENDGUARD_REOPEN="rewrite")

    def test_s3_rewrite_that_fails_half_way_leaves_no_misplaced_byte(self):
        # One file, so the order of writes is known: the header (H bytes) is written, then the store fills up
        # half-way through writing it back at the reopen. The open fails with ENOSPC, the notice says how
        # much was written back, and what reached the store is a prefix of the good file.
        one = [PYTHON, DCP, None, "--files", "1", "--tensors", "2", "--tensor-bytes", "4096", "--workers", "1"]
        expected = self.local_reference(lambda d: one[:2] + [d] + one[3:])
        name = "model-00001-of-00001.safetensors"
        header = 8 + int.from_bytes(expected[name][:8], "little")
        self.mount("s3", options=(f"fail_after={header + header // 2}",))
        proc = self.run_lib(one[:2] + [self.m("out")] + one[3:], APPENDGUARD_REOPEN="rewrite")
        self.assertFails(proc, 1)
        self.assertIn("[Errno 28] No space left on device", proc.stderr)
        self.assertIn(f"APPENDGUARD_REOPEN=rewrite wrote back {header // 2} of the file's {header} bytes (ENOSPC)",
                      proc.stderr)
        # The s3 profile keeps the file that was there (the header) until an upload replacing it completes.
        data = files_of(self.b("out"))[name]
        self.assertEqual(data, expected[name][:header])

    def test_s3_with_library_alone_holds_each_session_and_is_byte_identical_to_local(self):
        # The s3 profile is recognised as a write-once store (appendonlyfs:s3 in mountinfo): each header's
        # session is held at its close and handed back to the "r+b" reopen, so the store sees one
        # sequential upload per file.
        self.mount("s3")
        proc = self.run_lib(dcp(self.m("out")))
        self.assertOk(proc)
        self.assertNotIn("appendguard", proc.stderr)
        self.assertTreesEqual(files_of(self.b("out")), self.reference())
        self.assertNoMountRefusal()

    def test_s3_with_library_forced_append_reopen_is_refused_eperm(self):
        # APPENDGUARD_REOPEN=append on s3: the failure moves from EBADF on the first write to EPERM on the
        # reopen, and nothing but the headers reaches the store.
        self.mount("s3")
        proc = self.run_lib(dcp(self.m("out")), APPENDGUARD_REOPEN="append")
        self.assertFails(proc, 1)
        self.assertIn("dcp_consolidate: [Errno 1] Operation not permitted", proc.stderr)
        notices = [line for line in proc.stderr.splitlines() if "the filesystem refused the open as rewritten" in line]
        self.assertEqual(len(notices), 3, proc.stderr)
        self.assertIn("(O_WRONLY|O_APPEND|O_CLOEXEC) with EPERM", notices[0])
        expected = self.reference()
        written = files_of(self.b("out"))
        self.assertEqual(len(written), 3)
        for name, data in written.items():
            header_size = 8 + int.from_bytes(expected[name][:8], "little")
            self.assertEqual(data, expected[name][:header_size], name)
        refused_opens = [line for line in self.log_lines() if line.startswith("refused open ")]
        self.assertEqual(len(refused_opens), 3, self.log_lines())
        for line in refused_opens:
            self.assertIn("flags=O_WRONLY|O_APPEND errno=EPERM profile=s3", line)
        self.assertEqual(self.refused_writes(), [])


if __name__ == "__main__":
    main()
