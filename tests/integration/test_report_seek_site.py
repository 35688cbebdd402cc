"""Reports point at the culprit of a write at the position: `appendguard report`, `report --json` and
`report --html` give the seek that moved the position off the end (the raw report's "the position left
the end at:" block) beside the write site, from text and JSON logs; and the page counts and places the
refusal as the report does (one refusal, after the data write, with its report)."""
import json
import os
import re
import subprocess
import unittest

from harness import PYTHON, TempDirTest, run, script

LAUNCHER = os.environ.get("APPENDGUARD_LAUNCHER", "")
SEEK_SITE = re.compile(r'File "[^"]*seek_back\.py", line 10, in patch_header')
WRITE_SITE = re.compile(r'File "[^"]*seek_back\.py", line 15, in main')


class ReportSeekSiteTest(TempDirTest):
    def logged(self, name, **env):
        log = self.path(name)
        proc = run([PYTHON, script("seek_back.py"), self.path(name + ".safetensors")], APPENDGUARD_LOG=log, **env)
        self.assertNotEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("[Errno 95] Operation not supported", proc.stderr)
        return log

    def report(self, *args):
        return subprocess.run([LAUNCHER, "report", *args], capture_output=True, text=True, timeout=60)

    def test_report_text_names_the_seek_beside_the_write(self):
        for fmt in ("text", "json"):
            with self.subTest(format=fmt):
                proc = self.report(self.logged(f"ag-{fmt}.log", APPENDGUARD_FORMAT=fmt))
                self.assertEqual(proc.returncode, 1, proc.stderr)
                at = [line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("at: ")]
                seek = [line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("seek at: ")]
                self.assertEqual(len(at), 1, proc.stdout)
                self.assertRegex(at[0], WRITE_SITE)
                self.assertEqual(len(seek), 1, proc.stdout)
                self.assertRegex(seek[0], SEEK_SITE)
                self.assertIn(": lseek64(offset 0, SEEK_SET) -> 0, end of file 108", seek[0])

    def test_report_json_has_the_seek_site(self):
        proc = self.report("--json", self.logged("ag.log"))
        self.assertEqual(proc.returncode, 1, proc.stderr)
        [group] = json.loads(proc.stdout)["groups"]
        self.assertRegex(group["site"], WRITE_SITE)
        self.assertRegex(group["seek_site"], SEEK_SITE)
        self.assertTrue(group["seek_call"].startswith("lseek64(offset 0, SEEK_SET) -> 0, end of file 108"))

    def test_the_page_counts_one_refusal_after_the_data_with_its_report_and_seek(self):
        log = self.logged("ag.log", APPENDGUARD_TRACE="1")
        page = self.path("page.html")
        proc = self.report("--html", page, log)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        with open(page) as f:
            html = f.read()
        self.assertIn(">1 refusal<", html)
        self.assertNotIn("no report in these logs", html)
        [table] = re.findall(r'<table class="refusals">(.*?)</table>', html, re.S)
        rows = re.findall(r"<tr><td class=\"n\">(\d+)</td><td class=\"n\">[^<]*</td><td><code>([^<]*)</code></td>"
                          r"<td class=\"n\">(\d+)</td><td class=\"n\">(\d+)</td><td class=\"n\">(\d+)</td>", table)
        self.assertEqual(rows, [("1", "write", "0", "8", "108")], table)  # at 0, 8 bytes, after the 108 written
        self.assertRegex(table, r"seek at: File &quot;[^&]*seek_back\.py&quot;, line 10, in patch_header")


if __name__ == "__main__":
    unittest.main()
