"""Enforce mode with C programs: every libc entry point of the probe, plain, 64-bit and fortified."""
import os
import unittest

from harness import TempDirTest, program, read_bytes, results, run, violations

PROBES = ("probe", "probe64", "probe_fortified")


class EnforceTest(TempDirTest):
    def probe(self, case, *paths, name="probe", **env):
        proc = run([program(name), case, *paths], **env)
        self.assertOk(proc)
        return results(proc.stdout), proc.stderr

    def test_dcp_pattern_succeeds_with_same_bytes_as_without_library(self):
        for name in PROBES:
            with self.subTest(probe=name):
                guarded, plain = self.path(f"{name}.safetensors"), self.path(f"{name}-plain.safetensors")
                r, err = self.probe("dcp", guarded, name=name)
                self.assertEqual(r["seek_end"], "64")
                self.assertEqual(r["tell"], "3064")
                self.assertEqual(violations(err), [])
                proc = run([program(name), "dcp", plain], mode=None, preload=False)
                self.assertOk(proc)
                self.assertEqual(read_bytes(guarded), read_bytes(plain))

    def test_created_files_get_the_mode_the_program_gave(self):
        expected = {"m1.safetensors": "640", "m2.bin": "604", "m3.safetensors": "600", "m4.bin": "612",
                    "m5.safetensors": "620"}
        for name in PROBES:
            with self.subTest(probe=name):
                directory = self.path(name)
                os.mkdir(directory)
                r, _ = self.probe("modes", directory, name=name)
                self.assertEqual({k: r[k] for k in expected}, expected)

    def test_backward_write_is_refused_and_file_is_intact_prefix(self):
        for name in PROBES:
            with self.subTest(probe=name):
                path = self.path(f"{name}.safetensors")
                r, err = self.probe("backward", path, name=name)
                self.assertEqual(r["seek"], "10")
                self.assertEqual(r["write_back"], "-1 errno=EOPNOTSUPP")
                self.assertEqual(r["seek_end"], "100")
                self.assertEqual(r["write_end"], "5")
                self.assertEqual(read_bytes(path), b"a" * 100 + b"c" * 5)
                lines = violations(err)
                self.assertEqual(len(lines), 1, err)
                self.assertIn(f"write {path} fd=", lines[0])
                self.assertIn("bytes=5 offset=10 end_of_file=100: refused (EOPNOTSUPP)", lines[0])

    def test_configured_errno_is_returned(self):
        path = self.path("e.safetensors")
        r, _ = self.probe("backward", path, APPENDGUARD_ERRNO="EPERM")
        self.assertEqual(r["write_back"], "-1 errno=EPERM")
        self.assertEqual(read_bytes(path), b"a" * 100 + b"c" * 5)

    def test_pwrite_below_end_refused_and_at_end_accepted(self):
        path = self.path("p.safetensors")
        r, err = self.probe("pwrite", path)
        self.assertEqual(r["pwrite_below"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["pwrite_end"], "5")
        self.assertEqual(r["position"], "0")  # pwrite leaves the position alone
        self.assertEqual(r["pwritev_below"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["pwritev_end"], "5")
        self.assertEqual(r["writev_at_position"], "-1 errno=EOPNOTSUPP")  # position 0, end 110
        self.assertEqual(read_bytes(path), b"a" * 100 + b"b" * 10)
        self.assertEqual(len(violations(err)), 3)

    def test_dup_family_shares_the_position(self):
        path = self.path("d.safetensors")
        r, err = self.probe("dup", path)
        self.assertEqual(r["dup_position"], "10")
        self.assertEqual(r["write_dup"], "10")
        self.assertEqual(r["orig_position"], "20")
        self.assertEqual(r["fcntl_dup_position"], "20")
        self.assertEqual(r["dup2"], "60")
        self.assertEqual(r["seek_dup2_back"], "0")
        self.assertEqual(r["orig_after_dup2_seek"], "0")
        self.assertEqual(r["write_at_0"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["seek_end"], "20")
        self.assertEqual(r["write_last_dup"], "10")  # the F_DUPFD copy outlives the others
        self.assertEqual(read_bytes(path), b"x" * 30)

    def test_two_opens_of_one_file_share_the_end(self):
        path = self.path("two.safetensors")
        r, _ = self.probe("twoopens", path)
        self.assertEqual(r["write_a"], "10")
        self.assertEqual(r["seek_b_end"], "10")
        self.assertEqual(r["write_b"], "10")
        self.assertEqual(r["write_a_stale"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(read_bytes(path), b"x" * 20)

    def test_rwf_noappend_is_refused(self):
        path = self.path("n.safetensors")
        r, err = self.probe("noappend", path)
        self.assertEqual(r["pwritev2_noappend"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["pwritev2_plain"], "4")
        self.assertEqual(r["pwritev2_position"], "-1 errno=EOPNOTSUPP")  # position 0, end 14
        self.assertIn("RWF_NOAPPEND", err)
        self.assertEqual(read_bytes(path), b"a" * 10 + b"b" * 4)

    def test_setfl_cannot_clear_append(self):
        path = self.path("s.safetensors")
        r, _ = self.probe("setfl", path)
        self.assertEqual(r["append_before"], "1")
        self.assertEqual(r["setfl"], "0")
        self.assertEqual(r["append_after"], "1")
        self.assertEqual(r["write_at_0"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(read_bytes(path), b"a" * 10)

    def test_eight_threads_append_to_eight_files(self):
        r, err = self.probe("threads", self.dir)
        self.assertEqual(r["threads_failed"], "0")
        self.assertEqual(violations(err), [])
        for i in range(8):
            data = read_bytes(self.path(f"t{i}.safetensors"))
            expected = b"".join(bytes([ord("a") + (n + i) % 26]) * 4096 for n in range(500))
            self.assertEqual(data, expected)

    def test_fork_child_keeps_writing_correctly(self):
        path = self.path("f.safetensors")
        r, err = self.probe("fork", path)
        self.assertEqual(r["child_write"], "10")
        self.assertEqual(r["child_position"], "20")
        self.assertEqual(r["child_seek0"], "0")
        self.assertEqual(r["child_write_back"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["child_exit"], "0")
        self.assertEqual(read_bytes(path), b"p" * 10 + b"c" * 10)

    def test_resizing_is_refused_unless_it_only_grows(self):
        path = self.path("r.safetensors")
        r, err = self.probe("resize", path)
        self.assertEqual(r["ftruncate_same"], "0")
        self.assertEqual(r["ftruncate_shrink"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["truncate_path"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["truncate_path_same"], "0")
        self.assertEqual(r["posix_fallocate_within"], "0")
        self.assertEqual(r["posix_fallocate_extend"], "0")  # deferred: zeros appended at close
        self.assertEqual(r["fallocate_keep_size"], "0")
        self.assertEqual(r["fallocate_punch"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(read_bytes(path), b"a" * 100 + b"\0" * 50)
        self.assertEqual(len(violations(err)), 3)

    def test_resizing_that_grows_is_refused_with_prealloc_refuse(self):
        path = self.path("r.safetensors")
        r, err = self.probe("resize", path, APPENDGUARD_PREALLOC="refuse")
        self.assertEqual(r["posix_fallocate_extend"], "EOPNOTSUPP")
        self.assertEqual(r["fallocate_keep_size"], "0")
        self.assertEqual(read_bytes(path), b"a" * 100)
        self.assertEqual(len(violations(err)), 4)

    def test_deferred_preallocation_is_zero_filled_at_close_or_exit(self):
        for ending in ("close", "exit"):
            with self.subTest(ending=ending):
                path = self.path(f"p-{ending}.safetensors")
                r, err = self.probe("prealloc", path, ending)
                self.assertEqual(r["ftruncate_grow"], "0")
                self.assertEqual(r["seek_end"], "1000")
                self.assertEqual(r["fstat_size"], "1000")
                self.assertEqual(r["fxstat_size"], "1000")
                self.assertEqual(r["write"], "300")
                self.assertEqual(r["fallocate_keep_size"], "0")
                self.assertEqual(r["posix_fallocate_within"], "0")
                self.assertEqual(r["ftruncate_cut"], "-1 errno=EOPNOTSUPP")  # below the bytes written
                self.assertEqual(r["seek_end_after"], "1000")
                self.assertEqual(r["write_past_end"], "-1 errno=EOPNOTSUPP")  # skips the physical end
                self.assertEqual(len(violations(err)), 2)
                # KEEP_SIZE reserved 8192 bytes without changing the size the program sees.
                self.assertEqual(read_bytes(path), b"x" * 300 + b"\0" * 700)

    def test_deferred_preallocation_in_audit_mode_is_reported(self):
        path = self.path("p.safetensors")
        r, err = self.probe("prealloc", path, "close", mode="audit")
        self.assertEqual(r["ftruncate_grow"], "0")
        grows = [v for v in violations(err) if v.startswith("appendguard: violation: ftruncate") and "offset=1000" in v]
        self.assertEqual(len(grows), 1, err)
        self.assertIn("enforce mode defers it", err)

    def test_reads_and_shared_maps_of_rewritten_handle_are_reported(self):
        path = self.path("m.safetensors")
        r, err = self.probe("read", path)
        self.assertEqual(r["read"], "-1 errno=EBADF")
        self.assertEqual(r["pread"], "-1 errno=EBADF")
        self.assertEqual(r["mmap_shared_write"], "-1 errno=EACCES")
        self.assertEqual(r["read_only_read"], "10")
        lines = violations(err)
        self.assertEqual(len(lines), 2, err)  # the first read (reads are reported once) and the mmap
        self.assertTrue(lines[0].startswith("appendguard: violation: read "))
        self.assertIn("the call fails (EBADF)", lines[0])
        self.assertTrue(lines[1].startswith("appendguard: violation: mmap "))

    def test_lseek_is_answered_from_the_logical_position(self):
        path = self.path("k.safetensors")
        r, _ = self.probe("seek", path)
        self.assertEqual(r["seek_end_minus"], "90")
        self.assertEqual(r["seek_cur_plus"], "95")
        self.assertEqual(r["seek_negative"], "-1 errno=EINVAL")
        self.assertEqual(r["seek_data"], "20")
        self.assertEqual(r["seek_hole"], "100")
        self.assertEqual(r["seek_data_past"], "-1 errno=ENXIO")
        self.assertEqual(r["seek_past_end"], "1000")
        self.assertEqual(r["write_past_end"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(read_bytes(path), b"a" * 100)

    def test_kernel_copies_into_guarded_file_work(self):
        source, target = self.path("source.bin"), self.path("copy.safetensors")
        data = bytes(range(256)) * 8
        with open(source, "wb") as f:
            f.write(data)
        r, err = self.probe("copy", source, target)
        self.assertEqual(r["sendfile"], "1000")
        self.assertEqual(r["copy_file_range"], "1000")
        self.assertEqual(r["splice"], "500")
        self.assertEqual(r["position"], "2500")
        self.assertEqual(r["copy_file_range_back"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(read_bytes(target), data[:2000] + b"p" * 500)

    def test_close_range_forgets_descriptors(self):
        r, err = self.probe("closerange", self.path("c.safetensors"), self.path("other.bin"), APPENDGUARD_TRACE="1")
        self.assertEqual(r["close_range"], "0")
        self.assertRegex(err, r"appendguard: trace: pid=\d+ tid=\d+ close_range fd=\d+ .*c\.safetensors.*closed by close_range")
        self.assertEqual(r["same_number"], "1")
        self.assertEqual(r["seek_other_back"], "0")
        self.assertEqual(r["rewrite_other"], "10")
        self.assertEqual(violations(err), [])

    def test_descriptors_closed_behind_our_back_are_not_checked_as_the_old_file(self):
        for case in ("rawclose", "freopen_close"):
            with self.subTest(case=case):
                r, err = self.probe(case, self.path(f"{case}.safetensors"), self.path(f"{case}.bin"))
                self.assertEqual(r["same_number"], "1")
                self.assertEqual(r["write_other"], "10")
                self.assertEqual(r["rewrite_other"], "10")  # not refused: that number is another file now
                self.assertEqual(violations(err), [])
        self.assertEqual(read_bytes(self.path("freopen_close.safetensors")), b"through glibc")

    def test_openat_and_creat_are_guarded(self):
        r, err = self.probe("openat", self.dir, "at.safetensors", cwd=self.dir)
        self.assertEqual(r["write"], "10")
        self.assertEqual(r["write_back"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["creat_write"], "10")
        self.assertEqual(r["creat_pwrite_back"], "-1 errno=EOPNOTSUPP")
        self.assertIn(os.path.join(self.dir, "at.safetensors"), violations(err)[0])
        self.assertIn(os.path.join(self.dir, "created.safetensors"), violations(err)[1])

    def test_read_write_open_of_missing_file_still_fails(self):
        r, _ = self.probe("missing", self.path("none.safetensors"))
        self.assertEqual(r["open_rw_missing"], "-1 errno=ENOENT")
        self.assertFalse(os.path.exists(self.path("none.safetensors")))

    def test_report_has_symbolized_backtrace_and_open_site(self):
        path = self.path("b.safetensors")
        r, err = self.probe("culprit", path)
        self.assertEqual(r["culprit"], "-1 errno=EOPNOTSUPP")
        self.assertIn("  native stack:\n    #0 ", err)
        self.assertIn("culprit_writes_backwards", err)
        self.assertIn("(probe+0x", err)
        self.assertIn('opened: open("' + path + '", O_RDWR), rewritten to O_WRONLY|O_APPEND', err)
        self.assertIn("  opened at:\n", err)
        self.assertIn("case_culprit", err.split("  opened at:\n", 1)[1])

    def test_rewrite_reopen_writes_the_old_bytes_back_and_guards_the_same(self):
        guarded, plain = self.path("rw.safetensors"), self.path("rw-plain.safetensors")
        r, err = self.probe("dcp", guarded, APPENDGUARD_REOPEN="rewrite", APPENDGUARD_TRACE="1")
        self.assertEqual(r["seek_end"], "64")
        self.assertEqual(r["tell"], "3064")
        self.assertIn("flags=O_RDWR effective=O_WRONLY|O_TRUNC size=64", err)
        self.assertOk(run([program("probe"), "dcp", plain], mode=None, preload=False))
        self.assertEqual(read_bytes(guarded), read_bytes(plain))
        path = self.path("rwb.safetensors")
        r, err = self.probe("backward", path, APPENDGUARD_REOPEN="rewrite")
        self.assertEqual(r["seek"], "10")
        self.assertEqual(r["write_back"], "-1 errno=EOPNOTSUPP")
        self.assertIn("rewritten to O_WRONLY|O_TRUNC (the file's 100 existing bytes read first and written back)",
                      err)
        self.assertEqual(r["seek_end"], "100")
        self.assertEqual(r["write_end"], "5")
        self.assertEqual(read_bytes(path), b"a" * 100 + b"c" * 5)
        r, _ = self.probe("missing", self.path("none.safetensors"), APPENDGUARD_REOPEN="rewrite")
        self.assertEqual(r["open_rw_missing"], "-1 errno=ENOENT")

    def test_unmatched_paths_are_untouched(self):
        path = self.path("plain.bin")
        r, err = self.probe("backward", path)
        self.assertEqual(r["write_back"], "5")
        self.assertEqual(read_bytes(path), b"a" * 10 + b"b" * 5 + b"a" * 85 + b"c" * 5)
        self.assertEqual(violations(err), [])

    def test_path_patterns_select_files(self):
        sub = self.path("ckpt")
        os.mkdir(sub)
        guarded, other = os.path.join(sub, "x.bin"), self.path("y.safetensors")
        pattern = f"{self.dir}/ckpt/**"
        r, _ = self.probe("backward", guarded, APPENDGUARD_PATHS=pattern)
        self.assertEqual(r["write_back"], "-1 errno=EOPNOTSUPP")
        r, _ = self.probe("backward", other, APPENDGUARD_PATHS=pattern)
        self.assertEqual(r["write_back"], "5")
        r, _ = self.probe("backward", self.path("z.bin"), APPENDGUARD_PATHS="*.safetensors:*.bin")
        self.assertEqual(r["write_back"], "-1 errno=EOPNOTSUPP")


if __name__ == "__main__":
    unittest.main()
