"""What a report's stacks show (issue 10, "Reports for triage"): the Python stack first, then the native
frames that matter (not libc's frames of the call, not ours, not the interpreter's or the thread's start;
APPENDGUARD_TRACE=1 keeps them all); and for a write refused at a position the program moved, where the
position left the end of file (tests/integration/programs/report_sites.c, scripts/seek_then_close.py)."""
import json
import os
import re
import unittest

from harness import PYTHON, TempDirTest, program, results, run, script, violations


def report_blocks(stderr):
    """The violation reports of a stderr, each as its text block."""
    blocks = []
    for line in stderr.splitlines():
        if line.startswith("appendguard: violation:"):
            blocks.append(line + "\n")
        elif blocks and line.startswith("  "):
            blocks[-1] += line + "\n"
    return blocks


def section(block, heading):
    """The indented lines under `heading` (a line of the block that starts with it)."""
    lines = block.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(heading):
            body = []
            for following in lines[i + 1:]:
                if not following.startswith("    "):
                    break
                body.append(following[4:])
            return body
    return None


def frames(lines):
    return [line for line in lines if line.startswith("#")]


class NativeStacks(TempDirTest):
    def sites(self, case, **env):
        path = self.path(case + ".safetensors")
        proc = run([program("report_sites"), case, path], **env)
        self.assertOk(proc)
        return results(proc.stdout), report_blocks(proc.stderr), proc

    def test_a_stream_write_starts_at_the_program_not_in_libc(self):
        r, [block], _ = self.sites("stdio")
        self.assertEqual(r["flush"], "-1")
        native = section(block, "  native stack:")
        self.assertIn("culprit_rewrites_stream_start", frames(native)[0], block)
        self.assertFalse([f for f in frames(native) if "(libc.so" in f or "(libappendguard" in f], block)
        # main is the last frame: the thread's start (libc's, _start) is left out, and said to be.
        self.assertIn(" main+", frames(native)[-1], block)
        [note] = [line for line in native if line.startswith("(not shown:")]
        self.assertRegex(note, r"^\(not shown: \d+ frames? of libc above #0, \d+ frames? below, the thread's "
                               r"start; APPENDGUARD_TRACE=1 shows them\)$")

    def test_trace_mode_keeps_every_frame(self):
        _, [block], _ = self.sites("stdio", APPENDGUARD_TRACE="1")
        native = frames(section(block, "  native stack:"))
        self.assertIn("(libc.so", native[0], block)  # fflush's way down to the file
        self.assertTrue(any("culprit_rewrites_stream_start" in f for f in native), block)
        self.assertIn("_start+", native[-1], block)
        self.assertNotIn("(not shown:", block)


class SeekSites(TempDirTest):
    def sites(self, case, **env):
        path = self.path(case + ".safetensors")
        proc = run([program("report_sites"), case, path], **env)
        self.assertOk(proc)
        return results(proc.stdout), report_blocks(proc.stderr)

    def test_the_report_names_the_seek_that_left_the_end(self):
        r, [block] = self.sites("seek")
        self.assertEqual((r["seek"], r["tell"], r["write_later"]), ("0", "0", "-1"))
        self.assertIn("write_header_later", frames(section(block, "  native stack:"))[0], block)
        self.assertIn("  the position left the end at: lseek(offset 0, SEEK_SET) -> 0, end of file 10, tid ",
                      block)
        seek = frames(section(block, "  the position left the end at:"))
        self.assertIn("seek_to_start", seek[0], block)
        self.assertNotIn("tell_here", block)  # lseek(fd, 0, SEEK_CUR) records nothing
        # appendguard report still groups by the write's site, not the seek's.
        self.assertLess(block.index("  native stack:"), block.index("  the position left the end at:"))

    def test_back_at_the_end_the_next_seek_away_is_named(self):
        r, [block] = self.sites("seek_again")
        self.assertEqual((r["end"], r["write_end"], r["middle"], r["write_later"]), ("10", "1", "2", "-1"))
        self.assertIn("left the end at: lseek(offset 2, SEEK_SET) -> 2, end of file 11", block)
        self.assertIn("seek_into_middle", frames(section(block, "  the position left the end at:"))[0], block)
        self.assertNotIn("seek_to_start", block)

    def test_a_refused_pwrite_names_no_seek(self):
        r, [block] = self.sites("no_seek")
        self.assertEqual(r["pwrite"], "-1")
        self.assertNotIn("left the end at", block)

    def test_fseek_is_named_for_a_stream(self):
        r, [block] = self.sites("fseek")
        self.assertEqual((r["fseek"], r["flush"]), ("0", "-1"))
        self.assertIn("  the position left the end at: stdio_seek(offset 0, SEEK_SET) -> 0, end of file 10", block)
        self.assertIn("fseek_to_start", frames(section(block, "  the position left the end at:"))[0], block)
        self.assertIn("fwrite_later", frames(section(block, "  native stack:"))[0], block)

    def test_json_has_the_seek_site(self):
        path = self.path("j.safetensors")
        proc = run([program("report_sites"), "seek", path], APPENDGUARD_FORMAT="json", APPENDGUARD_SUMMARY="0")
        self.assertOk(proc)
        [report] = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith('{"type":"violation"')]
        seek = report["left_end_at"]
        self.assertEqual((seek["operation"], seek["offset"], seek["whence"], seek["position"], seek["end_of_file"]),
                         ("lseek", 0, "SEEK_SET", 0, 10))
        self.assertIn("seek_to_start", seek["native_stack"][0])
        self.assertIn("libc_above", report.get("native_stack_left_out", {"libc_above": 0}))


class OpenSites(TempDirTest):
    """Issue 27: an open's site is unwound once per place and read back from the stack after; libunwind is
    loaded when a stack is first needed."""

    def test_each_open_names_its_own_opener_though_the_sites_differ_in_one_frame(self):
        # open_here_a and open_here_b have the same frame and are called from the same place: a site read
        # back for the other opener would name the wrong one.
        path = self.path("o")
        proc = run([program("report_sites"), "two_openers", path])
        self.assertOk(proc)
        r = results(proc.stdout)
        self.assertEqual((r["pwrite_a"], r["pwrite_b"]), ("-1", "-1"))
        blocks = report_blocks(proc.stderr)
        self.assertEqual(len(blocks), 4, proc.stderr)
        for i, block in enumerate(blocks):
            opened = frames(section(block, "  opened at:"))
            self.assertIn(f"o.{i}.safetensors", block.splitlines()[0])
            self.assertIn("open_here_b" if i % 2 else "open_here_a", opened[0], block)
            self.assertIn("opens_through", opened[1], block)
            self.assertIn(" main+", opened[2], block)

    def test_every_way_into_the_open_hooks_names_its_opener_when_read_back(self):
        # Each opener twice from the same place: the first site unwound, the second read back from the stack
        # above the hook's frame (open, openat, creat; libc's syscall() through the system call layer).
        path = self.path("e")
        proc = run([program("report_sites"), "entry_points", path])
        self.assertOk(proc)
        r = results(proc.stdout)
        blocks = report_blocks(proc.stderr)
        for name in ("open", "openat", "creat", "syscall"):
            for i in (0, 1):
                self.assertEqual(r[f"{name}.{i}.safetensors"], "-1", proc.stderr)
                [block] = [b for b in blocks if f"e.{name}.{i}.safetensors" in b.splitlines()[0]]
                opened = frames(section(block, "  opened at:"))
                self.assertIn(f"open_by_{name}", opened[0], block)
                self.assertIn("opens_through", opened[1], block)
                self.assertIn(" main+", opened[2], block)

    def test_the_open_site_names_the_opening_process_and_thread(self):
        # Issue 27: the thread id is kept per thread (asked once), the pid taken from the owner check. A
        # second thread, the first again, and a fork child's copy of the first thread each name their own.
        path = self.path("ids")
        proc = run([program("report_sites"), "ids", path])
        self.assertOk(proc)
        r = results(proc.stdout)
        blocks = report_blocks(proc.stderr)
        for who in ("main", "thread", "again", "child"):
            self.assertEqual(r[who + "_pwrite"], "-1", proc.stderr)
            [block] = [b for b in blocks if f"ids.{who}.safetensors" in b.splitlines()[0]]
            self.assertRegex(block, rf"\n  opened: .* by pid {r[who + '_pid']} tid {r[who + '_tid']}\n", block)
        self.assertNotEqual(r["thread_tid"], r["main_tid"])
        self.assertEqual(r["again_tid"], r["main_tid"])
        self.assertNotEqual(r["child_pid"], r["main_pid"])
        self.assertEqual(r["child_pid"], r["child_tid"])

    def test_a_process_that_needs_no_stack_does_not_load_libunwind(self):
        # Before: every process loaded libunwind (and liblzma) at start: most of an exec's start-up.
        proc = run(["cat", "/proc/self/maps"])
        self.assertOk(proc)
        self.assertIn("libappendguard", proc.stdout)
        self.assertNotIn("libunwind", proc.stdout)
        # A guarded open loads it (the shell's redirection), and its maps then show it.
        proc = run(["sh", "-c", 'exec 3>"$1"; cat /proc/$$/maps', "sh", self.path("s.safetensors")])
        self.assertOk(proc)
        self.assertIn("libunwind", proc.stdout)

    def test_an_open_in_a_signal_handler_before_libunwind_is_loaded_says_its_site_was_not_recorded(self):
        proc = run([program("report_sites"), "opened_in_handler", self.path("h.safetensors")])
        self.assertOk(proc)
        self.assertEqual(results(proc.stdout)["pwrite"], "-1")
        [block] = report_blocks(proc.stderr)
        self.assertEqual(section(block, "  opened at:"),
                         ["(not recorded: the open was made in a signal handler before libunwind was first "
                          "loaded, and it cannot be loaded there)"], block)
        # The report itself, outside the handler, loads it: its stack is there.
        self.assertIn(" main+", frames(section(block, "  native stack:"))[-1], block)


class PythonStacks(TempDirTest):
    def close_after_seek(self, **env):
        path = self.path("p.safetensors")
        proc = run([PYTHON, script("seek_then_close.py"), path], **env)
        self.assertOk(proc)
        self.assertEqual(results(proc.stdout)["close"], "95", proc.stderr)  # EOPNOTSUPP
        [block] = report_blocks(proc.stderr)
        return block

    @staticmethod
    def line_of(text):
        with open(script("seek_then_close.py")) as f:
            return next(i for i, line in enumerate(f, 1) if text in line)

    def test_python_stack_comes_first_and_the_native_stack_is_cut(self):
        block = self.close_after_seek()
        self.assertLess(block.index("  python stack (most recent call first):"), block.index("  native stack:"))
        python = section(block, "  python stack (most recent call first):")
        self.assertRegex(python[0], rf'^File ".*seek_then_close.py", line {self.line_of("f.close()")}, in <module>$')
        native = section(block, "  native stack:")
        self.assertFalse([f for f in frames(native) if "PyEval_EvalFrame" in f or "(libc.so" in f], block)
        self.assertTrue(native[-1].startswith("(not shown: "), block)
        self.assertIn("the Python interpreter's and its callers' (the python stack says where)", native[-1])

    def test_the_seek_line_is_named_though_the_write_comes_at_close(self):
        block = self.close_after_seek()
        heading = [line for line in block.splitlines() if line.startswith("  the position left the end at: ")]
        self.assertEqual(len(heading), 1, block)
        self.assertRegex(heading[0], r"lseek(64)?\(offset 0, SEEK_SET\) -> 0, end of file 10, tid \d+$")
        seek = section(block, "  the position left the end at:")
        self.assertRegex(seek[0], rf'^File ".*seek_then_close.py", line {self.line_of("f.seek(0)")}, in <module>$')

    def test_trace_mode_keeps_the_interpreter_frames(self):
        block = self.close_after_seek(APPENDGUARD_TRACE="1")
        native = frames(section(block, "  native stack:"))
        self.assertTrue(any("PyEval_EvalFrame" in f for f in native), block)


if __name__ == "__main__":
    unittest.main()
