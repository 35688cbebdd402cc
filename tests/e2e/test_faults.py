"""The fault options of appendonlyfs under the library: short writes and signals complete the file
exactly (Python's buffered writer and a C retry loop retry); ENOSPC (fail_after) and EIO (eio_every)
reach the program as errors, and the backing file holds exactly the bytes reported written. After a
failed write the library's position is unchanged, so a retry lands at the end and is accepted.

What this kernel does with signals (checked by the interrupt tests): a FUSE write that the daemon has
taken is waited for whatever non-fatal signal arrives (the kernel forwards an INTERRUPT request, which
appendonlyfs ignores), and a large direct-I/O write keeps sending its chunks after a signal; so
write(2) returns the full count, never EINTR or a short count, and the handler runs afterwards.
"""
import re

from e2e_support import (DCP, PYTHON, MountTest, e2e_program, e2e_script, files_of, main, read_bytes, results,
                         violations)

FAULT_WRITER = e2e_program("e2e_fault_writer")
PY_WRITER = e2e_script("py_writer.py")
HEADER = b"H" * 64
DCP_ARGS = ["--files", "3", "--tensors", "4", "--tensor-bytes", "16384", "--workers", "3"]


def pattern(total):
    return bytes((i * 7 + i // 251) % 256 for i in range(total))


def dcp(output_dir):
    return [PYTHON, DCP, output_dir, *DCP_ARGS]


class FaultTest(MountTest):
    def write_c(self, mode, total, chunk, signal_us=None, expect_rc=0):
        argv = [FAULT_WRITER, mode, self.m("f.safetensors"), str(total), str(chunk)]
        if signal_us:
            argv.append(str(signal_us))
        proc = self.run_lib(argv)
        self.assertEqual(proc.returncode, expect_rc, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        self.assertEqual(violations(proc.stderr), [])
        return proc

    def write_py(self, mode, total, chunk, signal_us=None, expect_rc=0):
        argv = [PYTHON, PY_WRITER, mode, self.m("f.safetensors"), str(total), str(chunk)]
        if signal_us:
            argv += ["--signal-us", str(signal_us)]
        proc = self.run_lib(argv)
        self.assertEqual(proc.returncode, expect_rc, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        self.assertEqual(violations(proc.stderr), [])
        return proc

    def assertBacking(self, total_written):
        data = read_bytes(self.b("f.safetensors"))
        self.assertEqual(len(data), 64 + total_written)
        self.assertTrue(data == HEADER + pattern(total_written), "the stored bytes are not header + pattern")

    def fault_lines(self, kind):
        return [line for line in self.log_lines() if line.startswith(f"fault {kind} ")]

    def assertOnlyFaults(self, *kinds):
        lines = self.log_lines()
        self.assertTrue(lines, "the mount logged no fault")
        for line in lines:
            self.assertTrue(any(line.startswith(f"fault {k} ") for k in kinds), line)

    # ------------------------------------------------------------------ short writes

    def dcp_short_writes(self, profile):
        self.mount(profile, ["short_writes=1000"])
        proc = self.run_lib(dcp(self.m("out")))
        self.assertOk(proc)
        self.assertEqual(violations(proc.stderr), [])
        self.assertTreesEqual(files_of(self.b("out")), self.local_reference(dcp))
        self.assertOnlyFaults("short")
        for line in self.log_lines():
            self.assertRegex(line, r" accepted=1000 cause=short_writes$")

    def test_hdfs_dcp_buffered_python_short_writes_byte_identical(self):
        self.dcp_short_writes("hdfs")

    def test_strict_dcp_buffered_python_short_writes_byte_identical(self):
        self.dcp_short_writes("strict")

    def c_short_writes(self, profile, mode):
        self.mount(profile, ["short_writes=777"])
        r = results(self.write_c(mode, 50000, 5000).stdout)
        self.assertGreater(int(r["shorts"]), 0)
        self.assertEqual(r["errors"], "0")
        self.assertEqual(r["written"], "50000")
        self.assertEqual(r["tell"], "50064")
        self.assertEqual(r["end"], "50064")
        self.assertBacking(50000)
        self.assertOnlyFaults("short")
        self.assertEqual(len(self.fault_lines("short")), int(r["shorts"]))

    def test_hdfs_c_retry_loop_short_writes(self):
        self.c_short_writes("hdfs", "retry")

    def test_strict_c_retry_loop_short_writes(self):
        self.c_short_writes("strict", "retry")

    def test_s3_c_retry_loop_short_writes_one_handle(self):
        self.c_short_writes("s3", "retry-new")

    # ------------------------------------------------------------------ signals (EINTR)

    def test_hdfs_c_signal_during_blocking_writes_no_eintr(self):
        # Each 64 KiB write blocks 100 ms in the mount; SIGALRM (no SA_RESTART) fires every 20 ms.
        self.mount("hdfs", ["delay_us=100000"])
        r = results(self.write_c("retry", 4 * 65536, 65536, signal_us=20000).stdout)
        self.assertGreaterEqual(int(r["signals"]), 4)  # at least one per blocking write
        self.assertEqual(r["eintr"], "0")
        self.assertEqual(r["shorts"], "0")
        self.assertEqual(r["tell"], str(64 + 4 * 65536))
        self.assertBacking(4 * 65536)
        self.assertNoMountRefusal()

    def test_hdfs_c_signal_during_multi_request_write_full_count(self):
        # One 3 MiB write() becomes several FUSE requests (at most 1 MiB each), 50 ms apiece; signals
        # every 10 ms do not cut it short.
        self.mount("hdfs", ["delay_us=50000"])
        r = results(self.write_c("retry", 3 << 20, 3 << 20, signal_us=10000).stdout)
        self.assertGreaterEqual(int(r["signals"]), 1)
        self.assertEqual(r["eintr"], "0")
        self.assertEqual(r["shorts"], "0")
        self.assertEqual(r["tell"], str(64 + (3 << 20)))
        self.assertBacking(3 << 20)
        self.assertNoMountRefusal()

    def test_hdfs_python_signal_during_blocking_writes(self):
        self.mount("hdfs", ["delay_us=50000"])
        r = results(self.write_py("buffered", 4 * 65536, 65536, signal_us=10000).stdout)
        self.assertGreaterEqual(int(r["signals"]), 4)
        self.assertEqual(r["written"], str(4 * 65536))
        self.assertEqual(r["tell"], str(64 + 4 * 65536))
        self.assertBacking(4 * 65536)
        self.assertNoMountRefusal()

    # ------------------------------------------------------------------ ENOSPC (fail_after)

    def c_enospc(self, profile, mode):
        # 64 + 9 x 1000 bytes fit; the 10th chunk is cut at 10000 (936 bytes), the rest fails ENOSPC,
        # and so does the retry.
        self.mount(profile, ["fail_after=10000"])
        proc = self.write_c(mode, 20000, 1000, expect_rc=3)
        r = results(proc.stdout)
        self.assertEqual(re.findall(r"^error=(\S+) at=(\d+)$", proc.stdout, re.M), [("ENOSPC", "9936")])
        self.assertEqual(r["retry_after_error"], "-1 errno=ENOSPC")
        self.assertEqual(r["shorts"], "1")
        self.assertEqual(r["written"], "9936")
        self.assertEqual(r["tell"], "10000")
        self.assertEqual(r["end"], "10000")
        self.assertBacking(9936)
        short = self.fault_lines("short")
        self.assertEqual(len(short), 1, self.log_lines())
        self.assertRegex(short[0], r" offset=9064 size=1000 accepted=936 cause=fail_after$")
        enospc = self.fault_lines("enospc")
        self.assertEqual(len(enospc), 2, self.log_lines())
        for line in enospc:
            self.assertRegex(line, r" offset=10000 size=64 errno=ENOSPC cause=fail_after$")
        self.assertEqual(self.refused_writes(), [])

    def test_hdfs_c_enospc_reported_bytes_are_stored_bytes(self):
        self.c_enospc("hdfs", "errors")

    def test_strict_c_enospc_reported_bytes_are_stored_bytes(self):
        self.c_enospc("strict", "errors")

    def test_s3_c_enospc_reported_bytes_are_stored_bytes_one_handle(self):
        self.c_enospc("s3", "errors-new")

    def test_hdfs_python_raw_enospc_position_exact(self):
        self.mount("hdfs", ["fail_after=10000"])
        proc = self.write_py("raw", 20000, 1000, expect_rc=3)
        r = results(proc.stdout)
        self.assertEqual(re.findall(r"^error=(\S+)$", proc.stdout, re.M), ["ENOSPC"])
        self.assertEqual(r["retry"], "ENOSPC")
        self.assertEqual(r["tell_mismatches"], "0")
        self.assertEqual(r["written"], "9936")
        self.assertEqual(r["tell"], "10000")
        self.assertEqual(r["fstat_size"], "10000")
        self.assertBacking(9936)

    def test_hdfs_dcp_enospc_surfaces_and_store_holds_exactly_the_limit(self):
        self.mount("hdfs", ["fail_after=50000"])
        proc = self.run_lib(dcp(self.m("out")))
        self.assertFails(proc, 1)
        self.assertIn("dcp_consolidate: [Errno 28] No space left on device", proc.stderr)
        self.assertEqual(violations(proc.stderr), [])
        expected = self.local_reference(dcp)
        written = files_of(self.b("out"))
        self.assertNotIn("model.safetensors.index.json", written)
        self.assertEqual(len(written), 3)
        self.assertEqual(sum(len(data) for data in written.values()), 50000)
        for name, data in written.items():
            self.assertTrue(expected[name].startswith(data), f"{name} is not a prefix of the good file")
        self.assertEqual(self.refused_writes(), [])
        self.assertGreaterEqual(len(self.fault_lines("enospc")), 1)

    # ------------------------------------------------------------------ EIO (eio_every)

    def c_eio_retry(self, profile, mode):
        # The header is the mount's write 1; every 4th accepted write fails EIO and stores nothing; the
        # retry at the same (unchanged) position is accepted.
        self.mount(profile, ["eio_every=4"])
        proc = self.write_c(mode, 20000, 1000)
        r = results(proc.stdout)
        errors = re.findall(r"^error=(\S+) at=(\d+)$", proc.stdout, re.M)
        self.assertEqual(errors, [("EIO", str(at)) for at in (2000, 5000, 8000, 11000, 14000, 17000)])
        self.assertEqual(re.findall(r"^retry_after_error=(.*)$", proc.stdout, re.M), ["1000"] * 6)
        self.assertEqual(r["written"], "20000")
        self.assertEqual(r["tell"], "20064")
        self.assertEqual(r["end"], "20064")
        self.assertBacking(20000)
        eio = self.fault_lines("eio")
        self.assertEqual([re.search(r" offset=(\d+) ", line).group(1) for line in eio],
                         [str(64 + at) for at in (2000, 5000, 8000, 11000, 14000, 17000)])
        self.assertOnlyFaults("eio")

    def test_hdfs_c_eio_then_retry_at_end_succeeds(self):
        self.c_eio_retry("hdfs", "errors")

    def test_strict_c_eio_then_retry_at_end_succeeds(self):
        self.c_eio_retry("strict", "errors")

    def test_s3_c_eio_then_retry_at_end_succeeds_one_handle(self):
        self.c_eio_retry("s3", "errors-new")

    def test_hdfs_python_raw_eio_then_retry_position_exact(self):
        self.mount("hdfs", ["eio_every=4"])
        proc = self.write_py("raw", 20000, 1000)
        r = results(proc.stdout)
        self.assertEqual(re.findall(r"^error=(\S+)$", proc.stdout, re.M), ["EIO"] * 6)
        self.assertEqual(re.findall(r"^retry=(\S+)$", proc.stdout, re.M), ["1000"] * 6)
        self.assertEqual(r["tell_mismatches"], "0")
        self.assertEqual(r["tell"], "20064")
        self.assertBacking(20000)
        self.assertEqual(len(self.fault_lines("eio")), 6)

    def test_hdfs_python_buffered_eio_close_flush_lands_at_the_end(self):
        # The buffered writer keeps the chunk whose flush failed (EIO, nothing stored) and close()
        # flushes it again: it must land right after the 2000 bytes stored, not be refused or misplaced.
        self.mount("hdfs", ["eio_every=4"])
        proc = self.write_py("buffered", 20000, 1000, expect_rc=3)
        r = results(proc.stdout)
        self.assertEqual(re.findall(r"^error=(\S+)$", proc.stdout, re.M), ["EIO"])
        self.assertEqual(r["written"], "2000")
        self.assertEqual(r["fstat_size"], "2064")
        self.assertNotIn("close_error", r)
        self.assertBacking(3000)
        self.assertEqual(len(self.fault_lines("eio")), 1)

    def test_hdfs_eio_inside_a_large_write_is_a_short_count(self):
        # A 3 MiB write() is several FUSE requests: when one after the first fails EIO, write(2) returns
        # the bytes stored before it (a short count, no error); the retry loop completes the file.
        self.mount("hdfs", ["eio_every=3"])
        proc = self.write_c("errors", 3 << 20, 3 << 20)
        r = results(proc.stdout)
        self.assertGreaterEqual(int(r["shorts"]), 1)
        self.assertEqual(int(r["shorts"]) + int(r["errors"]), len(self.fault_lines("eio")))
        self.assertEqual(r["tell"], str(64 + (3 << 20)))
        self.assertBacking(3 << 20)
        self.assertOnlyFaults("eio")

    def test_hdfs_dcp_eio_surfaces_and_files_are_exact_prefixes(self):
        self.mount("hdfs", ["eio_every=5"])
        proc = self.run_lib(dcp(self.m("out")))
        self.assertFails(proc, 1)
        self.assertIn("dcp_consolidate: [Errno 5] Input/output error", proc.stderr)
        self.assertEqual(violations(proc.stderr), [])
        expected = self.local_reference(dcp)
        written = files_of(self.b("out"))
        self.assertNotIn("model.safetensors.index.json", written)
        self.assertEqual(len(written), 3)
        for name, data in written.items():
            self.assertTrue(expected[name].startswith(data), f"{name} is not a prefix of the good file")
        self.assertTrue(any(len(data) < len(expected[name]) for name, data in written.items()))
        self.assertGreaterEqual(len(self.fault_lines("eio")), 1)
        self.assertOnlyFaults("eio")


if __name__ == "__main__":
    main()
