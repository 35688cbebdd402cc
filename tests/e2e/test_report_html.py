"""`appendguard report --html` on the trace of the PyTorch 2.9+ DCP consolidation pattern
(tests/integration/scripts/dcp_consolidate.py) run under the library on a live appendonlyfs mount (hdfs
profile): every write is an append, so the page has no red; one SVG per file written (the whole mount is
guarded: the shards and the index JSON); per shard the header span, then the reopen's tensor appends drawn
as one span, the reopen with the flags asked and used, the seek to the end."""
import os
import re

import report_page
from e2e_support import DCP, PYTHON, MountTest, main

ARGS = ["--files", "3", "--tensors", "4", "--tensor-bytes", "16384", "--workers", "3"]


class ReportHtmlDcpTest(MountTest):
    def test_dcp_consolidation_page_is_all_appends(self):
        if not report_page.LAUNCHER or not os.path.exists(report_page.LAUNCHER):
            self.fail("APPENDGUARD_LAUNCHER is not set to the built launcher; run through ctest")
        self.mount("hdfs")
        log = self.path("ag-%r.log")
        proc = self.run_lib([PYTHON, DCP, self.m("out"), *ARGS], APPENDGUARD_TRACE="1", APPENDGUARD_LOG=log)
        self.assertOk(proc)
        log = self.path("ag-0.log")
        with open(log) as f:
            text = f.read()
        self.assertNotIn("appendguard: violation:", text)
        out = self.path("dcp.html")
        result = report_page.report_html([log], out)
        self.assertEqual(result.returncode, 0, result.stderr)
        page = report_page.parse(out)
        self.assertEqual(page.scripts, 0)
        self.assertEqual(page.external, [])
        shards = [self.m(f"out/model-{i:05d}-of-00003.safetensors") for i in (1, 2, 3)]
        index = self.m("out/model.safetensors.index.json")
        self.assertEqual(sorted(s["path"] for s in page.svgs), sorted(shards + [index]))
        for svg in page.svgs:
            self.assertEqual(report_page.marks(svg, "span refused"), [], svg["path"])
        header_lines = {}
        for shard in shards:
            svg = page.svg_of(shard)
            spans = report_page.marks(svg, "span write")
            self.assertEqual([int(a["data-writes"]) for a in spans], [1, 4], shard)
            header = int(spans[0]["data-end"])
            self.assertEqual(int(spans[1]["data-offset"]), header)
            self.assertEqual(int(spans[1]["data-end"]), header + 4 * 16384)
            # Every traced write of the file is in a span (none left out, none counted twice).
            traced = [line for line in text.splitlines() if f" {shard} " in line
                      and re.match(r"appendguard: trace: pid=\d+ tid=\d+ write fd=", line)]
            self.assertEqual(len(traced), 5)
            opens = report_page.marks(svg, "open")
            self.assertEqual(len(opens), 2)
            self.assertEqual(len(report_page.marks(svg, "open reopen")), 1)
            self.assertEqual(len(report_page.marks(svg, "seek")), 1)
            header_lines[shard] = header
        body = "".join(page.text)
        # The reopen's flags: asked O_RDWR, used O_WRONLY|O_APPEND (in the mark's title).
        self.assertRegex(body, r"reopen: open\w* fd=\d+ flags=O_RDWR\S* effective=O_WRONLY\|O_APPEND")


if __name__ == "__main__":
    main()
