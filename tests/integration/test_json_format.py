"""APPENDGUARD_FORMAT=json: every report, trace line, notice and summary is one JSON object per line."""
import json
import unittest

from harness import PYTHON, TempDirTest, program, run


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
