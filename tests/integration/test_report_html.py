"""`appendguard report --html OUT.html LOG...` on logs of real runs under the library (APPENDGUARD_TRACE=1,
APPENDGUARD_LOG=file): the random-offset writer (refusals marked at their offsets), a 2-rank job writing one
folder (%r in the log name); the page parses as HTML, has one SVG per guarded file with the expected marks,
needs nothing outside itself, and renders in headless Chromium (screenshot decoded: not blank, red shown).
Unknown options of `report` are one line and status 2."""
import glob
import json
import os
import re
import subprocess
import unittest

import harness
import report_page
from harness import PYTHON, TempDirTest, script

RANK_JOB = r"""
import os, sys
rank = int(os.environ["RANK"])
path = os.path.join(sys.argv[1], f"shard-rank{rank}.safetensors")
with open(path, "wb") as f:
    f.write(b"H" * 64)
with open(path, "r+b") as f:
    f.seek(0, os.SEEK_END)
    for i in range(3 + rank):
        f.write(bytes([65 + i]) * 4096)
if rank == 1:
    try:
        with open(path, "r+b", buffering=0) as f:
            f.seek(8)
            f.write(b"patch")  # the length patched at the front: refused
    except OSError as error:
        print(f"rank 1: {error}")
"""

PREALLOCATED = r"""
import os, sys
path = sys.argv[1]
with open(path, "wb") as f:
    os.ftruncate(f.fileno(), 8192)  # safetensors 0.8's preallocation: deferred
    f.write(b"A" * 4096)            # the rest is zero-filled at close
with open(path, "r+b") as f:
    f.seek(0, os.SEEK_END)
    f.write(b"B" * 1024)
"""


def report(*args):
    return subprocess.run([report_page.LAUNCHER, "report", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=60)


def traced(test, argv, log, **env):
    return harness.run(argv, APPENDGUARD_TRACE="1", APPENDGUARD_LOG=log, **env)


def write_lines(log, path):
    """The trace lines of successful writes of `path` in a text log."""
    with open(log) as f:
        return [line for line in f if line.startswith("appendguard: trace: ") and f" {path} " in line
                and re.search(r" (write|pwrite64|writev) fd=", line) and "(refused)" not in line]


class ReportHtmlTest(TempDirTest):
    def setUp(self):
        super().setUp()
        if not report_page.LAUNCHER or not os.path.exists(report_page.LAUNCHER):
            self.fail("APPENDGUARD_LAUNCHER is not set to the built launcher; run through ctest")

    def page_of(self, logs, name="page.html"):
        out = self.path(name)
        proc = report_page.report_html(logs, out)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        self.assertTrue(proc.stdout.startswith(f"appendguard report: wrote {out}: "), proc.stdout)
        page = report_page.parse(out)
        self.assertEqual(page.scripts, 0)
        self.assertEqual(page.external, [], "the page refers to something outside itself")
        return out, page, proc

    def test_unknown_options_are_one_line_and_status_2(self):
        log = self.path("empty.log")
        open(log, "w").close()
        for args, word in ((["--htm", "x.html", log], "--htm"), (["--bogus", log], "--bogus"),
                           ([log, "-x"], "-x")):
            proc = report(*args)
            self.assertEqual(proc.returncode, 2, (args, proc.stdout, proc.stderr))
            self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
            self.assertIn(f"unknown option '{word}'", proc.stderr)
            self.assertIn("accepted: --json, --html OUT.html", proc.stderr)
            self.assertEqual(proc.stdout, "")
        proc = report(log, "--html")
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
        self.assertIn("--html", proc.stderr)
        # Before CLI11, "--html" was read as a log: the same line now reads the options it names.
        self.assertEqual(report("--json", log).returncode, 0)
        self.assertEqual(json.loads(report("--json", log).stdout)["violations"], 0)
        self.assertFalse(os.path.exists(self.path("x.html")))

    def test_random_writer_refusals_marked_at_their_offsets(self):
        target = self.path("shards.safetensors")
        log = self.path("ag.log")
        proc = traced(self, [PYTHON, script("random_writer.py"), target], log)
        self.assertNotEqual(proc.returncode, 0, "the random writer must be refused")
        with open(log) as f:
            text = f.read()
        refused = [int(m) for m in re.findall(r"^appendguard: violation: \w+ \S+ fd=\d+ bytes=\d+ offset=(\d+) ",
                                             text, re.M)]
        self.assertTrue(refused, text)
        self.assertTrue(set(refused) <= {1024, 2048, 3072}, refused)
        out, page, proc = self.page_of([log])
        self.assertEqual(proc.returncode, 1)  # violations found, as `appendguard report`
        self.assertEqual(len(page.svgs), 1, [s["path"] for s in page.svgs])
        svg = page.svg_of(target)
        self.assertIsNotNone(svg)
        red = report_page.marks(svg, "span refused")
        self.assertEqual(sorted(int(a["data-offset"]) for a in red), sorted(refused))
        writes = report_page.marks(svg, "span write")
        self.assertEqual(sum(int(a["data-writes"]) for a in writes), len(write_lines(log, target)))
        self.assertEqual(int(writes[0]["data-offset"]), 0)
        self.assertEqual(len(report_page.marks(svg, "open")), 2)  # "wb", then the "r+b" reopen
        self.assertEqual(len(report_page.marks(svg, "open reopen")), 1)
        self.assertTrue(report_page.marks(svg, "seek"))
        self.assertTrue(report_page.marks(svg, "eof"))
        body = "".join(page.text)
        # The first report line and the call site (the Python frame) are below the timeline and on hover.
        self.assertIn("appendguard: violation: ", body)
        self.assertIn('at: File "' + script("random_writer.py") + '"', body)
        self.assertIn("rank 0 pid ", body)
        # The screenshot: Chromium renders the page from its file; it is not blank and shows the red marks.
        png = report_page.screenshot(out, self.path("page.png"))
        census = report_page.colour_census(png)
        self.assertGreater(len(census), 20, "a blank or nearly blank screenshot")
        self.assertLess(max(census.values()) / sum(census.values()), 0.97, "one colour covers the screenshot")
        self.assertTrue(any(report_page.is_reddish(c) for c in census), "no red refusal in the screenshot")

    def test_json_logs_draw_the_same_refusals(self):
        target = self.path("shards.safetensors")
        log = self.path("ag.jsonl")
        proc = traced(self, [PYTHON, script("random_writer.py"), target], log, APPENDGUARD_FORMAT="json")
        self.assertNotEqual(proc.returncode, 0)
        with open(log) as f:
            records = [json.loads(line) for line in f if line.startswith("{")]
        refused = [r["offset"] for r in records if r["type"] == "violation"]
        writes = [r for r in records if r["type"] == "trace" and r["operation"] == "write" and r["result"] >= 0]
        self.assertTrue(refused)
        self.assertTrue(all("time" in r for r in records if r["type"] == "trace"))
        # Read from standard input too.
        out = self.path("page.html")
        with open(log) as f:
            proc = subprocess.run([report_page.LAUNCHER, "report", "--html", out, "-"], stdin=f,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        page = report_page.parse(out)
        svg = page.svg_of(target)
        self.assertEqual(sorted(int(a["data-offset"]) for a in report_page.marks(svg, "span refused")), sorted(refused))
        self.assertEqual(sum(int(a["data-writes"]) for a in report_page.marks(svg, "span write")), len(writes))
        self.assertIn('at: File "' + script("random_writer.py") + '"', "".join(page.text))

    def test_two_rank_job_in_one_folder(self):
        folder = self.path("ckpt")
        os.makedirs(folder)
        job = self.path("rank_job.py")
        with open(job, "w") as f:
            f.write(RANK_JOB)
        template = self.path("ag-%r.log")
        procs = [subprocess.Popen([PYTHON, job, folder], env=harness.child_env(
            "1", True, RANK=str(rank), APPENDGUARD_TRACE="1", APPENDGUARD_LOG=template),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
        for p in procs:
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
        logs = sorted(glob.glob(self.path("ag-*.log")))
        self.assertEqual([os.path.basename(l) for l in logs], ["ag-0.log", "ag-1.log"])
        out, page, proc = self.page_of(logs)
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(sorted(s["path"] for s in page.svgs),
                         [os.path.join(folder, f"shard-rank{r}.safetensors") for r in (0, 1)])
        body = "".join(page.text)
        for rank in (0, 1):
            svg = page.svg_of(os.path.join(folder, f"shard-rank{rank}.safetensors"))
            spans = report_page.marks(svg, "span write")
            # The header, then the appends of the reopen drawn as one span.
            self.assertEqual([int(a["data-writes"]) for a in spans], [1, 3 + rank])
            self.assertEqual(int(spans[1]["data-offset"]), 64)
            self.assertEqual(int(spans[1]["data-end"]), 64 + 4096 * (3 + rank))
            self.assertEqual(len({a["data-pid"] for a in spans}), 1)
            red = report_page.marks(svg, "span refused")
            self.assertEqual([int(a["data-offset"]) for a in red], [8] if rank else [])
            self.assertIn(f"rank {rank} pid {spans[0]['data-pid']}", body)
        self.assertIn("3 adjacent appends drawn with the write before them", body)

    def test_deferred_preallocation_zero_fill_and_held_session(self):
        target = self.path("pre.safetensors")
        job = self.path("pre.py")
        with open(job, "w") as f:
            f.write(PREALLOCATED)
        log = self.path("ag.log")
        proc = traced(self, [PYTHON, job, target], log, APPENDGUARD_REOPEN="hold")
        self.assertOk(proc)
        out, page, proc = self.page_of([log])
        self.assertEqual(proc.returncode, 0)
        svg = page.svg_of(target)
        deferred = report_page.marks(svg, "deferred")
        self.assertEqual(len(deferred), 1)
        fill = report_page.marks(svg, "span fill")
        self.assertEqual([(int(a["data-offset"]), int(a["data-end"])) for a in fill], [(4096, 8192)])
        writes = report_page.marks(svg, "span write")
        self.assertEqual([(int(a["data-offset"]), int(a["data-end"])) for a in writes], [(0, 4096), (8192, 9216)])
        self.assertEqual(len(report_page.marks(svg, "open reopen")), 1)
        self.assertEqual(len(report_page.marks(svg, "held")), 1)
        self.assertEqual(len(report_page.marks(svg, "commit")), 1)
        self.assertEqual(report_page.marks(svg, "span refused"), [])
        body = "".join(page.text)
        self.assertIn("deferred preallocation: ftruncate", body)
        self.assertIn("held session committed", body)


if __name__ == "__main__":
    unittest.main()
