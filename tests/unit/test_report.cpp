#include <catch2/catch.hpp>

#include <fcntl.h>

#include <string>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cli/report_summary.h"
#include "report/log_sink.h"
#include "report/report.h"
#include "report/summary.h"

using namespace appendguard;

TEST_CASE("log path templates") {
  char out[128];
  REQUIRE(expand_log_path("/tmp/ag-%h-%r-%p.log", 42, "node7", "3", out, sizeof out));
  CHECK(std::string(out) == "/tmp/ag-node7-3-42.log");
  REQUIRE(expand_log_path("100%%-%x", 1, "h", "0", out, sizeof out));
  CHECK(std::string(out) == "100%-%x");
  CHECK_FALSE(expand_log_path("/a/very/long/path/%h", 1, "hostname", "0", out, 12));
}

TEST_CASE("the first line of a violation names everything needed") {
  Description d;
  TrackedFile f;
  d.file = &f;
  char path[] = "/ckpt/a.safetensors";
  d.path = path;
  d.site.function = "open64";
  d.site.original_flags = O_RDWR | O_CLOEXEC;
  d.site.effective_flags = O_WRONLY | O_APPEND | O_CLOEXEC;
  d.site.pid = 10;
  d.site.tid = 11;
  Violation v;
  v.operation = "write";
  v.fd = 5;
  v.path = d.path;
  v.description = &d;
  v.count = 4096;
  v.offset = 0;
  v.end_of_file = 8192;
  v.why = "because";
  v.outcome = Outcome::kRefused;
  v.error = EOPNOTSUPP;
  ProcessIdentity who{10, 12, "/usr/bin/python3", "2", "node17"};
  char text[2048];
  TextBuffer out(text, sizeof text);
  format_violation(out, v, who);
  std::string s(out.view());
  CHECK(
      s.rfind("appendguard: violation: write /ckpt/a.safetensors fd=5 bytes=4096 offset=0 end_of_file=8192: "
              "refused (EOPNOTSUPP); pid 10 rank 2 host node17\n",
              0) == 0);
  CHECK(s.find("  why: because\n") != std::string::npos);
  CHECK(s.find("  opened: open64(\"/ckpt/a.safetensors\", O_RDWR|O_CLOEXEC), rewritten to "
               "O_WRONLY|O_APPEND|O_CLOEXEC by pid 10 tid 11\n") != std::string::npos);
  CHECK(s.find("  process: pid 10 tid 12 rank 2 program /usr/bin/python3\n") != std::string::npos);
}

TEST_CASE("let-through and audit outcomes") {
  Violation v;
  v.operation = "pwrite64";
  v.path = "/p";
  v.outcome = Outcome::kLetThrough;
  v.landing_offset = 77;
  char text[1024];
  TextBuffer out(text, sizeof text);
  format_violation(out, v, ProcessIdentity{});
  CHECK(std::string(out.view())
            .find("let through (APPENDGUARD_ON_VIOLATION=warn); the bytes land at offset 77") !=
        std::string::npos);
  out.clear();
  v.outcome = Outcome::kAuditOnly;
  format_violation(out, v, ProcessIdentity{});
  CHECK(std::string(out.view()).find("allowed (audit mode)") != std::string::npos);
  CHECK(std::string(out.view()).find("mount; needs a code change; pid ") != std::string::npos);
  out.clear();
  v.fixed_by_enforce = true;
  format_violation(out, v, ProcessIdentity{});
  CHECK(std::string(out.view()).find("mount; fixed by enforce mode; pid ") != std::string::npos);
}

TEST_CASE("the summary line") {
  char text[512];
  TextBuffer out(text, sizeof text);
  SummaryValues v{3, 1, 120, 4096, 2, 1, 10, 0};
  format_summary(out, v, 42, "7", "node17");
  CHECK(std::string(out.view()) ==
        "appendguard: summary: pid=42 rank=7 host=node17 guarded_opens=3 rewritten_opens=1 writes=120 "
        "bytes=4096 violations=2 fixed_by_enforce=1 refused_bytes=10 held_sessions=0\n");
}

TEST_CASE("trace lines and bounded buffers") {
  TraceEvent e;
  e.operation = "lseek64";
  e.fd = 3;
  e.path = "/x";
  e.detail = "offset=0 whence=2";
  e.result = -1;
  e.error = EINVAL;
  char text[256];
  TextBuffer out(text, sizeof text);
  format_trace(out, e, ProcessIdentity{1, 2, "", "0"});
  CHECK(std::string(out.view()) ==
        "appendguard: trace: pid=1 tid=2 lseek64 fd=3 /x offset=0 whence=2 -> -1 EINVAL\n");
  char tiny[8];
  TextBuffer small(tiny, sizeof tiny);
  small.add("{}", "0123456789");
  CHECK(small.full());
  CHECK(small.view() == "01234567");
}

TEST_CASE("a file name can neither forge report lines nor split fields, and report reads it back") {
  const char* names[] = {"/ckpt/evil\nappendguard: violation: write /x fd=1.safetensors",
                         "/ckpt/a fd=9 b.safetensors", "/ckpt/back\\slash \"quoted\"\t.safetensors",
                         "/ckpt/bell\x07\x7f.safetensors", "/ckpt/plain.safetensors"};
  for (const char* name : names) {
    Description d;
    d.path = const_cast<char*>(name);
    d.site.function = "open64";
    Violation v;
    v.operation = "write";
    v.path = name;
    v.description = &d;
    v.fd = 3;
    ProcessIdentity who;
    who.program = "/usr/bin/py thon\n";
    char text[8192];
    TextBuffer out(text, sizeof text);
    format_violation(out, v, who);
    std::string report(out.view());
    // One line per field of the report: the name added no line.
    CHECK(std::count(report.begin(), report.end(), '\n') == 4);
    std::vector<ViolationGroup> groups;
    collect_violations(report, groups);
    REQUIRE(groups.size() == 1);
    CHECK(groups[0].path == name);
    CHECK(groups[0].shown_path.find('\n') == std::string::npos);
    CHECK(groups[0].count == 1);
    TraceEvent e;
    e.operation = "write";
    e.path = name;
    TextBuffer trace(text, sizeof text);
    format_trace(trace, e, who);
    std::string line(trace.view());
    CHECK(std::count(line.begin(), line.end(), '\n') == 1);
  }
}

TEST_CASE("JSON reports, trace lines and summaries") {
  Violation v;
  v.operation = "write";
  v.fd = 5;
  v.path = "/ckpt/a \"b\"\n.safetensors";
  v.count = 8;
  v.offset = 0;
  v.end_of_file = 100;
  v.why = "because";
  v.outcome = Outcome::kAuditOnly;
  ProcessIdentity who{10, 12, "/usr/bin/python3", "2", "node17"};
  char text[2048];
  TextBuffer out(text, sizeof text);
  ReportStacks stacks;
  stacks.native = "    #0  0x1 f+0x1 (m+0x1)\n    #1  0x2 g+0x2 (m+0x2)\n";
  stacks.python = "    File \"/a.py\", line 3, in save\n";
  format_violation_json(out, v, who, stacks);
  // The Python stack first, innermost first, then the native frames that matter.
  CHECK(std::string(out.view()) ==
        "{\"type\":\"violation\",\"operation\":\"write\",\"path\":\"/ckpt/a "
        "\\\"b\\\"\\n.safetensors\",\"fd\":5,"
        "\"bytes\":8,\"offset\":0,\"end_of_file\":100,\"outcome\":\"audit\",\"finding\":\"needs a code "
        "change\","
        "\"why\":\"because\",\"pid\":10,\"tid\":12,\"rank\":\"2\",\"host\":\"node17\",\"program\":"
        "\"/usr/bin/python3\",\"python_stack\":[\"File \\\"/a.py\\\", line 3, in save\"],"
        "\"native_stack\":[\"#0  0x1 f+0x1 (m+0x1)\",\"#1  0x2 g+0x2 (m+0x2)\"]}\n");
  out.clear();
  // Frames left out, and where the position left the end.
  SeekSite seek;
  seek.function = "lseek64";
  seek.offset = 0;
  seek.whence = SEEK_SET;
  seek.position = 0;
  seek.end_of_file = 100;
  seek.tid = 12;
  const char seek_python[] = "    File \"/a.py\", line 2, in save\n";
  std::memcpy(seek.python, seek_python, sizeof seek_python - 1);
  seek.python_size = sizeof seek_python - 1;
  stacks.left_end_at = &seek;
  stacks.native_libc_above = 2;
  stacks.native_below = 40;
  stacks.left_end_at_native = "    #0  0x3 h+0x3 (m+0x3)\n";
  format_violation_json(out, v, who, stacks);
  std::string with_seek(out.view());
  CHECK(with_seek.find("\"native_stack_left_out\":{\"libc_above\":2,\"below\":40}") != std::string::npos);
  CHECK(
      with_seek.find("\"left_end_at\":{\"operation\":\"lseek64\",\"offset\":0,\"whence\":\"SEEK_SET\","
                     "\"position\":0,\"end_of_file\":100,\"tid\":12,\"python_stack\":[\"File "
                     "\\\"/a.py\\\", line 2, in save\"],\"native_stack\":[\"#0  0x3 h+0x3 (m+0x3)\"]}}\n") !=
      std::string::npos);
  out.clear();
  TraceEvent e;
  e.operation = "lseek64";
  e.fd = 3;
  e.path = "/x\x01";
  e.detail = "offset=0";
  e.result = -1;
  e.error = EINVAL;
  format_trace_json(out, e, who);
  CHECK(std::string(out.view()) ==
        "{\"type\":\"trace\",\"pid\":10,\"tid\":12,\"operation\":\"lseek64\",\"fd\":3,\"path\":\"/x\\u0001\","
        "\"detail\":\"offset=0\",\"result\":-1,\"errno\":\"EINVAL\"}\n");
  out.clear();
  format_summary_json(out, SummaryValues{1, 2, 3, 4, 5, 6, 7, 8}, 42, "0", "h");
  CHECK(std::string(out.view()) ==
        "{\"type\":\"summary\",\"pid\":42,\"rank\":\"0\",\"host\":\"h\",\"guarded_opens\":1,\"rewritten_"
        "opens\":2,"
        "\"writes\":3,\"bytes\":4,\"violations\":5,\"fixed_by_enforce\":6,\"refused_bytes\":7,\"held_"
        "sessions\":8}"
        "\n");
}

TEST_CASE("where the position left the end, and the frames left out") {
  SeekSite seek;
  seek.function = "lseek64";
  seek.offset = -4;
  seek.whence = SEEK_END;
  seek.position = 96;
  seek.end_of_file = 100;
  seek.tid = 7;
  char text[512];
  TextBuffer out(text, sizeof text);
  format_seek_site_heading(out, seek);
  CHECK(std::string(out.view()) ==
        "  the position left the end at: lseek64(offset -4, SEEK_END) -> 96, end of file 100, tid 7\n");
  out.clear();
  seek.whence = 9;
  format_seek_site_heading(out, seek);
  CHECK(std::string(out.view()).find("(offset -4, 9) -> 96") != std::string::npos);

  out.clear();
  format_frames_left_out(out, 0, 0, true);
  CHECK(out.view().empty());
  format_frames_left_out(out, 1, 0, false);
  CHECK(std::string(out.view()) ==
        "    (not shown: 1 frame of libc above #0; APPENDGUARD_TRACE=1 shows them)\n");
  out.clear();
  format_frames_left_out(out, 2, 41, true);
  CHECK(
      std::string(out.view()) ==
      "    (not shown: 2 frames of libc above #0, 41 frames below, the Python interpreter's and its callers' "
      "(the python stack says where); APPENDGUARD_TRACE=1 shows them)\n");
  out.clear();
  format_frames_left_out(out, 0, 3, false);
  CHECK(std::string(out.view()) ==
        "    (not shown: 3 frames below, the thread's start; APPENDGUARD_TRACE=1 shows them)\n");
  // `appendguard report` does not take the note for a frame.
  std::string block =
      "appendguard: violation: write /a fd=3 bytes=1 offset=0 end_of_file=5: refused (EOPNOTSUPP)\n"
      "  native stack:\n" +
      std::string(out.view()) + "    #0  0x0000004011aa culprit+0x1a (probe+0x11aa)\n";
  CHECK(call_site_of(block) == "culprit+0x1a (probe+0x11aa)");
}

TEST_CASE("RANK and the host name can forge no line of a report or a summary") {
  // Issue 24, item 11: a newline in RANK or in the host name started a line "appendguard: violation: ...".
  const char* forged = "0\nappendguard: violation: write /x fd=1 bytes=1 offset=0 end_of_file=0: refused";
  ProcessIdentity who{10, 12, "/usr/bin/python3", forged, forged};
  Violation v;
  v.operation = "write";
  v.path = "/ckpt/a.safetensors";
  v.fd = 3;
  char text[8192];
  TextBuffer out(text, sizeof text);
  format_violation(out, v, who);
  std::string report(out.view());
  std::vector<ViolationGroup> groups;
  collect_violations(report, groups);
  CHECK(groups.size() == 1);
  CHECK(report.find("\nappendguard:") == std::string::npos);
  TextBuffer summary(text, sizeof text);
  format_summary(summary, SummaryValues{1, 0, 0, 0, 0, 0, 0, 0}, 42, forged, forged);
  std::string line(summary.view());
  CHECK(std::count(line.begin(), line.end(), '\n') == 1);
  CHECK(line.back() == '\n');
}

TEST_CASE("a line cut at its buffer still ends with a newline") {
  char text[16];
  TextBuffer out(text, sizeof text);
  out.add_text("0123456789abcdefghij");
  REQUIRE(out.full());
  out.end_line();
  CHECK(out.view() == "0123456789abcde\n");
  TextBuffer room(text, sizeof text);
  room.add_text("abc");
  room.end_line();
  room.end_line();
  CHECK(room.view() == "abc\n");
}
