"""APPENDGUARD_FORMAT=json: every report, trace line, notice and summary is one JSON object per line."""
import json
import os
import subprocess
import unittest

from harness import PYTHON, TempDirTest, program, run

LAUNCHER = os.environ.get("APPENDGUARD_LAUNCHER", "")


class JsonFormatTest(TempDirTest):
    def objects(self, text):
        lines = [line for line in text.splitlines() if line.strip()]
        return [json.loads(line) for line in lines]  # every line parses

    def test_reports_trace_and_summary_are_json_lines(self):
        log = self.path("ag.log")
        proc = run([program("probe"), "backward", self.path("x.safetensors")], APPENDGUARD_FORMAT="json",
                   APPENDGUARD_TRACE="1", APPENDGUARD_LOG=log, RANK="5")
        self.assertOk(proc)
        with open(log) as f:
            objects = self.objects(f.read())
        kinds = [o["type"] for o in objects]
        self.assertIn("trace", kinds)
        self.assertEqual(kinds[-1], "summary")
        [violation] = [o for o in objects if o["type"] == "violation"]
        self.assertEqual((violation["operation"], violation["outcome"], violation["errno"]),
                         ("write", "refused", "EOPNOTSUPP"))
        self.assertEqual(violation["rank"], "5")
        self.assertEqual(violation["bytes"], 5)
        self.assertLess(violation["offset"], violation["end_of_file"])
        self.assertTrue(violation["native_stack"])
        self.assertEqual(violation["opened"]["effective_flags"], "O_WRONLY|O_APPEND")
        self.assertEqual(objects[-1]["violations"], 1)

    def test_python_stack_in_json(self):
        path = self.path("p.safetensors")
        code = (f"f = open({path!r}, 'wb'); f.write(b'x' * 10); f.flush(); f.seek(0)\n"
                "try:\n    f.write(b'h'); f.flush()\nexcept OSError: pass\n")
        proc = run([PYTHON, "-c", code], APPENDGUARD_FORMAT="json", APPENDGUARD_SUMMARY="0")
        violations = [o for o in self.objects(proc.stderr) if o["type"] == "violation"]
        self.assertTrue(violations, proc.stderr)
        self.assertTrue(any(frame.startswith("File \"<string>\"") for frame in violations[0]["python_stack"]),
                        violations[0])

    def test_invalid_format_is_status_2(self):
        proc = run(["true"], APPENDGUARD_FORMAT="yaml")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("APPENDGUARD_FORMAT='yaml': accepted: text, json", proc.stderr)


if __name__ == "__main__":
    unittest.main()


class LongLinesTest(TempDirTest):
    """Issue 24, items 10 and 11: a path of 3.5 KB of control bytes lost its trace line's newline (the next
    lines, the violation report among them, were glued on: `appendguard report` counted 0, JSON lines did not
    parse); a newline in RANK forged `appendguard: violation:` lines."""

    def control_byte_path(self):
        directory = self.dir
        for i in range(14):  # 14 components of 250 control bytes (no '/', no NUL)
            directory = os.path.join(directory, "".join(chr(1 + (i * 250 + j) % 30) for j in range(250)))
        os.makedirs(directory)
        return os.path.join(directory, "x.safetensors")

    def test_every_line_ends_and_parses(self):
        path = self.control_byte_path()
        forged_rank = "0\nappendguard: violation: write /forged fd=1 bytes=1 offset=0 end_of_file=0: refused"
        for form in ("text", "json"):
            with self.subTest(format=form):
                log = self.path(f"{form}.log")
                proc = run([program("probe"), "backward", path], APPENDGUARD_FORMAT=form, APPENDGUARD_TRACE="1",
                           APPENDGUARD_LOG=log, RANK=forged_rank)
                self.assertOk(proc)
                with open(log, "rb") as f:
                    data = f.read()
                self.assertTrue(data.endswith(b"\n"))
                lines = data.decode("utf-8", "replace").splitlines()
                if form == "json":
                    objects = [json.loads(line) for line in lines if line.strip()]
                    self.assertEqual([o["type"] for o in objects].count("violation"), 1)
                    self.assertGreater([o["type"] for o in objects].count("trace"), 1)
                else:
                    # Every line is one of ours: a trace line, a report's first line or one of its indented
                    # lines; exactly one violation, and no line longer than the line buffer.
                    self.assertEqual(sum(line.startswith("appendguard: violation: ") for line in lines), 1, data[:3000])
                    self.assertGreater(sum(line.startswith("appendguard: trace: ") for line in lines), 1)
                    for line in lines:
                        self.assertTrue(line.startswith("appendguard: ") or line.startswith("  "), line[:200])
                        self.assertLess(len(line), 16384)
                    proc = subprocess.run([LAUNCHER, "report", log], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True, errors="replace")
                    self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
                    self.assertIn("appendguard report: 1 violation", proc.stdout)
