#include <catch2/catch.hpp>
#include <string>

#include "cli/report_html.h"
#include "cli/timeline.h"

using namespace appendguard;

namespace {

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::string write_line(int pid, double time, unsigned long long offset, unsigned long long bytes) {
  char line[256];
  std::snprintf(
      line, sizeof line,
      "appendguard: trace: pid=%d tid=%d write fd=3 /ckpt/a.safetensors time=%.6f bytes=%llu offset=%llu "
      "end_of_file=%llu -> %llu\n",
      pid, pid, time, bytes, offset, offset + bytes, bytes);
  return line;
}

}  // namespace

TEST_CASE("trace lines of both formats become a file's timeline, with its writers' ranks") {
  std::string text =
      "appendguard: trace: pid=7 tid=7 open64 fd=3 /ckpt/a.safetensors time=100.000001 "
      "flags=O_RDWR|O_CLOEXEC effective=O_WRONLY|O_APPEND|O_CLOEXEC size=60 -> 3\n"
      "appendguard: trace: pid=7 tid=7 lseek64 fd=3 /ckpt/a.safetensors time=100.000002 offset=0 whence=2 "
      "end_of_file=60 -> 60\n"
      "unrelated program output\n" +
      write_line(7, 100.000003, 60, 40) + write_line(7, 100.000004, 100, 40) +
      "appendguard: trace: pid=7 tid=7 open64 fd=4 /ckpt/other.bin time=100.5 flags=O_RDONLY -> 4\n"
      "appendguard: summary: pid=7 rank=3 host=node17 guarded_opens=1 writes=2\n";
  std::string json =
      R"j({"type":"trace","pid":8,"tid":9,"operation":"ftruncate","fd":5,"path":"/ckpt/b \"q\".safetensors","detail":"offset=0 length=4096 size=0->4096 (deferred: not sent)","result":0,"time":100.25})j"
      "\n"
      R"j({"type":"trace","pid":8,"tid":9,"operation":"pwrite64","fd":5,"path":"/ckpt/b \"q\".safetensors","detail":"bytes=10 offset=0 end_of_file=0","result":10,"time":100.3})j"
      "\n"
      R"j({"type":"summary","pid":8,"rank":"1","host":"node18"})j"
      "\n";
  Timelines t;
  add_log(text, "a.log", 0, t);
  add_log(json, "b.log", 1, t);
  finish(t);
  REQUIRE(t.files.size() == 2);  // other.bin was only read
  CHECK(t.read_only_files == 1);
  const FileTimeline& a = t.files[0];
  CHECK(a.path == "/ckpt/a.safetensors");
  CHECK(a.timed);
  REQUIRE(a.events.size() == 4);
  CHECK(a.events[0].kind == EventKind::kOpen);
  CHECK(a.events[0].end_of_file == 60);
  CHECK(a.events[1].kind == EventKind::kSeek);
  CHECK(a.events[1].offset == 60);
  CHECK(a.events[2].kind == EventKind::kWrite);
  CHECK(a.events[2].time == Approx(100.000003));
  CHECK(a.writes == 2);
  CHECK(a.bytes == 80);
  REQUIRE(a.writers.size() == 1);
  CHECK(a.writers[0].rank == "3");
  CHECK(a.writers[0].host == "node17");
  const FileTimeline& b = t.files[1];
  CHECK(b.path == "/ckpt/b \"q\".safetensors");
  REQUIRE(b.events.size() == 2);
  CHECK(b.events[0].kind == EventKind::kDeferred);
  CHECK(b.events[0].end_of_file == 4096);
  CHECK(b.writers[0].rank == "1");
}

TEST_CASE("a refusal's report joins its trace line; a report without a trace is drawn by itself") {
  std::string log =
      write_line(7, 5.0, 0, 4096) +
      "appendguard: trace: pid=7 tid=7 write fd=3 /ckpt/a.safetensors time=5.100000 bytes=512 offset=1024 "
      "end_of_file=4096 (refused) -> -1 EOPNOTSUPP\n"
      "appendguard: violation: write /ckpt/a.safetensors fd=3 bytes=512 offset=1024 end_of_file=4096: "
      "refused "
      "(EOPNOTSUPP); pid 7 rank 2 host h\n"
      "  why: the write is not at the end of the file\n"
      "  python stack (most recent call first):\n"
      "    File \"/job/save.py\", line 8, in save\n"
      "appendguard: violation: pwrite64 /ckpt/c.safetensors fd=4 bytes=8 offset=0 end_of_file=100: refused "
      "(EOPNOTSUPP); pid 7 rank 2 host h\n"
      "  why: the write is not at the end of the file\n";
  Timelines t;
  add_log(log, "x.log", 0, t);
  finish(t);
  REQUIRE(t.files.size() == 2);
  const FileTimeline& a = t.files[0];
  REQUIRE(a.events.size() == 2);
  CHECK(a.events[1].kind == EventKind::kRefused);
  REQUIRE(a.events[1].report >= 0);
  CHECK(t.reports[static_cast<size_t>(a.events[1].report)].site == "File \"/job/save.py\", line 8, in save");
  CHECK(a.refusals == 1);
  CHECK(a.writers[0].rank == "2");  // from the report: no summary line
  const FileTimeline& c = t.files[1];
  REQUIRE(c.events.size() == 1);
  CHECK(c.events[0].offset == 0);
  CHECK(c.events[0].bytes == 8);
  CHECK(c.events[0].time == Approx(5.1));  // the time of the last traced line before it
  REQUIRE(t.groups.size() == 2);

  std::string page = render_html(t, HtmlOptions{{"x.log"}, 600});
  CHECK(count_of(page, "<svg class=\"timeline\"") == 2);
  CHECK(count_of(page, "class=\"span refused\"") == 2);
  CHECK(page.find("data-offset=\"1024\"") != std::string::npos);
  CHECK(page.find("at: File &quot;/job/save.py&quot;, line 8, in save") != std::string::npos);
  CHECK(page.find("<script") == std::string::npos);
  CHECK(page.find("rank 2 pid 7") != std::string::npos);
}

TEST_CASE("adjacent appends are drawn as one span; past the cap, writes merge further and a note says so") {
  std::string log;
  for (int i = 0; i < 10; ++i)
    log += write_line(7, 1.0 + i * 0.01, static_cast<unsigned long long>(i) * 10, 10);
  // Another process appends: a span of its own.
  log += write_line(8, 2.0, 100, 10);
  Timelines t;
  add_log(log, "x.log", 0, t);
  finish(t);
  std::string page = render_html(t, HtmlOptions{{"x.log"}, 600});
  CHECK(count_of(page, "class=\"span write") == 2);
  CHECK(page.find("data-writes=\"10\" data-offset=\"0\" data-end=\"100\"") != std::string::npos);
  CHECK(page.find("9 adjacent appends drawn with the write before them") != std::string::npos);

  // Writes that are not adjacent (every other block) cannot merge by adjacency: the cap merges them.
  std::string scattered;
  for (int i = 0; i < 100; ++i)
    scattered += write_line(7, 1.0 + i * 0.01, static_cast<unsigned long long>(i) * 20, 10);
  Timelines s;
  add_log(scattered, "y.log", 0, s);
  finish(s);
  std::string capped = render_html(s, HtmlOptions{{"y.log"}, 20});
  size_t spans = count_of(capped, "class=\"span write");
  CHECK(spans <= 20);
  CHECK(spans >= 5);
  CHECK(capped.find("more writes merged into spans to draw at most 20 marks") != std::string::npos);
  CHECK(count_of(render_html(s, HtmlOptions{{"y.log"}, 600}), "class=\"span write") == 100);
}

TEST_CASE("text from the logs is escaped in the page") {
  CHECK(html_escape("<a href=\"x\">&'</a>") == "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
  CHECK(html_escape("bell\x07") == "bell\\x07");
  Timelines t;
  add_log(write_line(7, 1.0, 0, 10) +
              "appendguard: trace: pid=7 tid=7 write fd=3 \"/c/<script>x.safetensors\" "
              "time=1.5 bytes=1 offset=0 end_of_file=0 -> 1\n",
          "<b>.log", 0, t);
  finish(t);
  std::string page = render_html(t, HtmlOptions{{"<b>.log"}, 600});
  CHECK(page.find("<script") == std::string::npos);
  CHECK(page.find("/c/&lt;script&gt;x.safetensors") != std::string::npos);
  CHECK(page.find("<b>.log") == std::string::npos);
}

TEST_CASE("JSON logs whose paths are not UTF-8 (written as they are by the library) are read") {
  // Why the hand-written JSON reader stays: nlohmann-json and simdjson refuse such a line as ill-formed.
  std::string log =
      "{\"type\":\"trace\",\"pid\":7,\"tid\":7,\"operation\":\"write\",\"fd\":3,\"path\":\"/ckpt/"
      "caf\xe9.bin\","
      "\"detail\":\"bytes=4 offset=0 end_of_file=4\",\"result\":4,\"time\":1.5}\n";
  Timelines t;
  add_log(log, "x.log", 0, t);
  finish(t);
  REQUIRE(t.files.size() == 1);
  CHECK(t.files[0].path == "/ckpt/caf\xe9.bin");
  CHECK(t.files[0].writes == 1);
}
