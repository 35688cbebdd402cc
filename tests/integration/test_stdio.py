"""C stdio and C++ streams on guarded files: fopen-family mode rewriting, and every stream write checked
against the end of file when it reaches the file (tests/integration/programs/stdio_probe.c,
stream_probe.cpp)."""
import os
import unittest

from harness import TempDirTest, program, read_bytes, results, run, violations

C_PROBES = ("stdio_probe", "stdio_probe_fortified")

# Cases whose outcome does not depend on the library: everything appends.
APPENDING_CASES = ("append",)
# Cases that write away from the end (refused in enforce mode, reported in audit mode), and how many
# stream writes each gets refused.
VIOLATING_CASES = {"seek_back": 1, "seek_back_putc": 1, "seek_back_large": 1, "fsetpos": 1, "rewind": 1,
                   "freopen_ours": 1, "fdopen": 1}


class StdioTest(TempDirTest):
    def probe(self, case, name="t.safetensors", binary="stdio_probe", mode="1", preload=True, **env):
        path = self.path(name)
        if os.path.exists(path):
            os.unlink(path)
        proc = run([program(binary), case, path], mode=mode, preload=preload, APPENDGUARD_BACKTRACE="0",
                   **env)
        self.assertOk(proc)
        data = read_bytes(path) if os.path.exists(path) else None
        return results(proc.stdout), data, violations(proc.stderr), proc

    def plain(self, case, binary="stdio_probe"):
        """The same scenario without the library."""
        return self.probe(case, binary=binary, mode=None, preload=False)

    def stream_writes(self, lines):
        return [line for line in lines if " stdio_write " in line]


class EnforceAppends(StdioTest):
    def test_every_stream_write_function_appends_as_without_the_library(self):
        for binary in C_PROBES:
            with self.subTest(binary=binary):
                r, data, reports, _ = self.probe("append", binary=binary)
                plain_r, plain_data, _, _ = self.plain("append", binary=binary)
                self.assertEqual(reports, [])
                self.assertEqual(data, plain_data)
                self.assertEqual(r, plain_r)
                self.assertTrue(data.startswith(b"HEADERABCD[42:fp]puts;cp0123456789"))
                self.assertTrue(data.endswith(b"FDtail"))
                self.assertEqual(len(data), 6 + 4 + 7 + 5 + 1 + 1 + 10000 + 2 + 4)
                self.assertEqual(r["tell"], "6")
                self.assertEqual(r["tell_after"], str(6 + 4 + 7 + 5 + 2 + 10000))
                self.assertEqual(r["putc_unlocked_ferror"], "0")
                self.assertEqual(r["fsync"], "0")
                self.assertEqual(r["fileno_valid"], "0")
                self.assertEqual(r["write_fd"], "2")
                self.assertEqual(r["lseek64_cur"], str(6 + 4 + 7 + 5 + 2 + 10000 + 2))
                self.assertEqual(r["fclose"], "0")

    def test_cxx_fstream_appends(self):
        r, data, reports, _ = self.probe("append", binary="stream_probe")
        self.assertEqual(reports, [])
        self.assertEqual(data, b"HEADERtensor:42" + b"B" * 100000)
        self.assertEqual(r["open"], "good")
        self.assertEqual(r["tellp"], "6")
        self.assertEqual(r["write"], "good")
        self.assertEqual(r["close"], "good")


class EnforceRefuses(StdioTest):
    def test_seek_back_and_fwrite_is_refused_at_fflush(self):
        r, data, reports, _ = self.probe("seek_back")
        self.assertEqual(data, b"HEADERGOOD")
        self.assertEqual(r["fwrite_start"], "3")  # buffered
        self.assertEqual(r["fflush"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["ferror"], "1")
        self.assertEqual(r["tell_after"], "0")  # nothing was written: still where it seeked
        self.assertEqual(r["fclose"], "0")  # the refused bytes are gone, not sent again
        self.assertEqual(len(reports), 1, reports)
        self.assertIn("stdio_write", reports[0])
        self.assertIn("bytes=3 offset=0 end_of_file=10: refused (EOPNOTSUPP)", reports[0])

    def test_inline_putc_bytes_are_refused_at_fclose_once(self):
        r, data, reports, _ = self.probe("seek_back_putc")
        self.assertEqual(data, b"HEADER")
        self.assertEqual(r["ferror_before_close"], "0")
        self.assertEqual(r["fclose"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(len(reports), 1, reports)
        self.assertIn("bytes=100 offset=2 end_of_file=6: refused", reports[0])

    def test_write_larger_than_the_buffer_is_refused_at_fwrite(self):
        r, data, reports, _ = self.probe("seek_back_large")
        self.assertEqual(data, b"HEADER")
        self.assertEqual(r["fwrite_large"], "0 errno=EOPNOTSUPP")
        self.assertEqual(r["ferror"], "1")
        self.assertEqual(r["fclose"], "0")
        self.assertEqual(len(reports), 1, reports)

    def test_fsetpos_back_is_refused_and_fsetpos64_to_the_end_appends(self):
        r, data, reports, _ = self.probe("fsetpos")
        self.assertEqual(data, b"HEADER123456")
        self.assertEqual(r["tell_back"], "6")
        self.assertEqual(r["fflush_back"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["fflush_end"], "0")
        self.assertEqual(len(reports), 1, reports)
        self.assertIn("bytes=2 offset=6 end_of_file=10", reports[0])

    def test_rewind_and_fputs_is_refused(self):
        r, data, reports, _ = self.probe("rewind")
        self.assertEqual(data, b"HEADER")
        self.assertEqual(r["tell_rewound"], "0")
        self.assertEqual(r["fflush"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(len(reports), 1, reports)

    def test_refusal_uses_the_configured_errno(self):
        r, data, reports, _ = self.probe("seek_back", APPENDGUARD_ERRNO="EIO")
        self.assertEqual(data, b"HEADERGOOD")
        self.assertEqual(r["fflush"], "-1 errno=EIO")
        self.assertEqual(len(reports), 1, reports)

    def test_warn_lets_the_stream_write_through_at_the_end(self):
        r, data, reports, _ = self.probe("seek_back", APPENDGUARD_ON_VIOLATION="warn")
        self.assertEqual(data, b"HEADERGOODBAD")
        self.assertEqual(r["fflush"], "0")
        self.assertEqual(len(reports), 1, reports)
        self.assertIn("let through", reports[0])

    def test_cxx_fstream_seek_to_start_and_write_fails_the_stream(self):
        r, data, reports, _ = self.probe("overwrite", binary="stream_probe")
        self.assertEqual(data, b"HEADEREND")
        self.assertEqual(r["seek_start"], "good")
        self.assertEqual(r["write_start"], "bad")
        self.assertTrue(reports, "no report")
        for line in reports:
            self.assertIn("bytes=1 offset=0 end_of_file=9: refused (EOPNOTSUPP)", line)

    def test_dprintf_is_checked(self):
        for binary in C_PROBES:
            with self.subTest(binary=binary):
                r, data, reports, _ = self.probe("dprintf", binary=binary)
                self.assertEqual(data, b"HEADERn=7;")
                self.assertEqual(r["dprintf_end"], "4")
                self.assertEqual(r["dprintf_start"], "-1 errno=EOPNOTSUPP")
                self.assertEqual(r["tell"], "0")
                self.assertEqual(len(reports), 1, reports)
                self.assertIn("dprintf", reports[0])
                self.assertIn("bytes=10 offset=0 end_of_file=10: refused", reports[0])


class EnforceOpens(StdioTest):
    def test_r_plus_on_a_missing_file_fails_with_enoent(self):
        r, data, reports, _ = self.probe("missing")
        self.assertEqual(r["open_missing"], "-1 errno=ENOENT")
        self.assertEqual(r["exists_after"], "0")
        self.assertEqual(r["open_invalid_mode"], "-1 errno=EINVAL")
        self.assertEqual(r["open_exclusive"], "-1 errno=EEXIST")
        self.assertEqual(data, b"HEADER")
        self.assertEqual(reports, [])

    def test_reading_an_r_plus_stream_fails_and_is_reported(self):
        r, data, reports, _ = self.probe("read")
        self.assertEqual(r["fread"], "0 errno=EBADF")
        self.assertEqual(data, b"HEADER")
        self.assertEqual(len(reports), 1, reports)
        self.assertIn("stdio_read", reports[0])

    def test_freopen_of_a_glibc_stream_rewrites_the_mode_and_checks_the_descriptor(self):
        r, data, reports, proc = self.probe("freopen")
        self.assertEqual(r["freopen"], "0")
        self.assertEqual(r["same_stream"], "0")
        self.assertEqual(r["access_write_only"], "1")
        self.assertEqual(r["fflush"], "0")
        # The documented limit: glibc's own stream writes are not seen; O_APPEND puts them at the end.
        self.assertEqual(r["fflush_start"], "0")
        self.assertEqual(r["write_fd_start"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(data, b"HEADERAPPENDEDback")
        self.assertEqual(r["freopen_missing"], "-1 errno=ENOENT")
        self.assertEqual(len(reports), 1, reports)
        self.assertIn(" write ", reports[0])
        # Issue 24: the unchecked stream is said once, at the freopen (it was silent).
        self.assertEqual(proc.stderr.count("reopens a glibc stream onto a guarded file"), 1, proc.stderr)
        self.assertIn('freopen("' + self.path("t.safetensors") + '", "r+b")', proc.stderr)

    def test_freopen_of_a_guarded_stream_keeps_checking(self):
        r, data, reports, _ = self.probe("freopen_ours")
        self.assertEqual(r["freopen"], "0")
        self.assertEqual(r["same_stream"], "0")
        self.assertEqual(r["tell"], "6")
        self.assertEqual(r["fflush"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(data, b"HEADERMORE")
        self.assertEqual(len(reports), 1, reports)

    def test_fdopen_of_a_tracked_descriptor_is_checked(self):
        r, data, reports, proc = self.probe("fdopen", APPENDGUARD_TRACE="1")
        self.assertRegex(proc.stderr, r"appendguard: trace: pid=\d+ tid=\d+ fdopen fd=\d+ .*a stream of ours")
        self.assertEqual(r["fileno_same"], "0")
        self.assertEqual(r["fflush_end"], "0")
        self.assertEqual(r["fflush_start"], "-1 errno=EOPNOTSUPP")
        self.assertEqual(r["fd_closed"], "1")
        self.assertEqual(r["fclose_append"], "0")
        self.assertEqual(data, b"HEADERfd1+a")
        self.assertEqual(len(reports), 1, reports)

    def test_unguarded_files_get_glibc_streams(self):
        r, data, reports, _ = self.probe("seek_back", name="t.bin")
        self.assertEqual(data, b"BADDERGOOD")
        self.assertEqual(r["fflush"], "0")
        self.assertEqual(reports, [])


class Audit(StdioTest):
    """Audit mode changes nothing (same results and bytes as without the library) and reports."""

    def test_audit_changes_nothing(self):
        cases = [(c, b) for c in list(APPENDING_CASES) + list(VIOLATING_CASES) + ["dprintf", "read", "missing"]
                 for b in C_PROBES] + [("append", "stream_probe"), ("overwrite", "stream_probe")]
        for case, binary in cases:
            with self.subTest(case=case, binary=binary):
                r, data, _, _ = self.probe(case, binary=binary, mode="audit")
                plain_r, plain_data, _, _ = self.plain(case, binary=binary)
                self.assertEqual(r, plain_r)
                self.assertEqual(data, plain_data)

    def test_audit_reports_stream_writes_away_from_the_end(self):
        for case, refused in VIOLATING_CASES.items():
            with self.subTest(case=case):
                _, _, reports, _ = self.probe(case, mode="audit")
                writes = self.stream_writes(reports)
                self.assertEqual(len(writes), refused, reports)
                self.assertIn("allowed (audit mode)", writes[0])

    def test_audit_reports_the_read_write_open_and_the_read(self):
        r, data, reports, _ = self.probe("read", mode="audit")
        self.assertEqual(r["fread"], "6")
        self.assertEqual(r["read_text"], "HEADER")
        self.assertTrue(any(" fopen " in line for line in reports), reports)
        self.assertTrue(any(" stdio_read " in line for line in reports), reports)

    def test_audit_reports_dprintf_and_cxx_writes(self):
        _, data, reports, _ = self.probe("dprintf", mode="audit")
        self.assertEqual(data, b"overwrite!")
        self.assertTrue(any(" dprintf " in line and "audit mode" in line for line in reports), reports)
        _, data, reports, _ = self.probe("overwrite", binary="stream_probe", mode="audit")
        self.assertEqual(data, b"XEADEREND")
        self.assertTrue(any(" write " in line and "offset=0" in line for line in reports), reports)

    def test_audit_appending_is_silent(self):
        _, _, reports, _ = self.probe("append", mode="audit")
        self.assertEqual(self.stream_writes(reports), [])
        _, _, reports, _ = self.probe("append", binary="stream_probe", mode="audit")
        self.assertEqual([line for line in reports if " write" in line], [])


if __name__ == "__main__":
    unittest.main()
