// The hand-rolled trace formatter (report/trace_format.h) against the reference format_trace and
// format_trace_json, and the per-thread trace buffers (report/trace_buffer.h) with a capturing writer.
#include <sys/syscall.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <string>
#include <thread>
#include <vector>

#include "report/escape.h"
#include "report/report.h"
#include "report/trace_buffer.h"
#include "report/trace_format.h"

using namespace appendguard;

namespace {

std::string reference(const TraceEvent& e, pid_t pid, pid_t tid, bool json) {
  static char text[64 * 1024];
  TextBuffer out(text, sizeof text);
  ProcessIdentity who{pid, tid, "", "0"};
  if (json) {
    format_trace_json(out, e, who);
  } else {
    format_trace(out, e, who);
  }
  return std::string(out.view());
}

std::string fast(const TraceEvent& e, pid_t pid, pid_t tid, bool json) {
  char prefix[kTracePrefixCapacity];
  size_t n = format_trace_prefix(prefix, sizeof prefix, pid, tid, json);
  static char text[64 * 1024];
  FastText out(text, sizeof text);
  append_trace_line(out, {prefix, n}, e, json);
  REQUIRE(!out.overflowed());
  return std::string(out.view());
}

std::string number_text(void (*put)(FastText&)) {
  char text[64];
  FastText out(text, sizeof text);
  put(out);
  return std::string(out.view());
}

}  // namespace

TEST_CASE("trace numbers are formatted by hand as printf would") {
  CHECK(number_text([](FastText& t) { t.unsigned_number(0); }) == "0");
  CHECK(number_text([](FastText& t) { t.unsigned_number(9); }) == "9");
  CHECK(number_text([](FastText& t) { t.unsigned_number(10); }) == "10");
  CHECK(number_text([](FastText& t) { t.unsigned_number(100); }) == "100");
  CHECK(number_text([](FastText& t) { t.unsigned_number(6400000); }) == "6400000");
  CHECK(number_text([](FastText& t) { t.unsigned_number(ULLONG_MAX); }) == "18446744073709551615");
  CHECK(number_text([](FastText& t) { t.signed_number(-1); }) == "-1");
  CHECK(number_text([](FastText& t) { t.signed_number(LLONG_MIN); }) == "-9223372036854775808");
  CHECK(number_text([](FastText& t) { t.signed_number(LLONG_MAX); }) == "9223372036854775807");
  CHECK(number_text([](FastText& t) { t.hex(0); }) == "0");
  CHECK(number_text([](FastText& t) { t.hex(0x8001); }) == "8001");
  CHECK(number_text([](FastText& t) { t.hex(ULLONG_MAX); }) == "ffffffffffffffff");
  char tiny[4];
  FastText out(tiny, sizeof tiny);
  out.text("abc");
  out.unsigned_number(12);  // does not fit: nothing of it is written, and nothing after it
  out.character('d');
  CHECK(out.overflowed());
  CHECK(out.view() == "abc");
}

TEST_CASE("hand-formatted trace lines equal the reference text and JSON formats") {
  std::vector<std::string> paths = {"/ckpt/plain.safetensors",
                                    "",
                                    "/a b",
                                    "/q\"uote",
                                    "/back\\slash",
                                    "/nl\nappendguard: violation: x",
                                    "/tab\t/cr\r",
                                    "/bell\x07\x7f",
                                    "/utf8/\xc3\xa9t\xc3\xa9.safetensors",
                                    std::string(300, 'p')};
  // A special byte at every position of a 40-byte path: the 16-byte, 8-byte and byte scans must see it.
  for (char special : {' ', '"', '\\', '\n', '\x01', '\x1f', '\x7f'}) {
    for (size_t at = 0; at < 40; ++at) {
      std::string p(40, 'x');
      p[at] = special;
      paths.push_back(p);
    }
  }
  TraceNumber write_numbers[] = {
      {"bytes", 5, 64, false}, {"offset", 6, 6399936, false}, {"end_of_file", 11, ULLONG_MAX, false}};
  TraceNumber seek_numbers[] = {{"offset", 6, static_cast<unsigned long long>(-5LL), true},
                                {"whence", 6, 2, true},
                                {"end_of_file", 11, 0, false}};
  for (const std::string& path : paths) {
    for (bool json : {false, true}) {
      TraceEvent e;
      e.operation = "write";
      e.fd = 3;
      e.path = path.c_str();
      e.result = 64;
      e.numbers = write_numbers;
      e.number_count = 3;
      CHECK(fast(e, 8089, 8090, json) == reference(e, 8089, 8090, json));
      e.detail = " (refused)";
      e.result = -1;
      e.error = EBADF;
      CHECK(fast(e, 1, 2, json) == reference(e, 1, 2, json));
      e.operation = "lseek64";
      e.numbers = seek_numbers;
      e.detail = "";
      e.result = 0;
      CHECK(fast(e, 1, 2, json) == reference(e, 1, 2, json));
      e.operation = "close";
      e.numbers = nullptr;
      e.number_count = 0;
      e.fd = -1;
      CHECK(fast(e, 1, 2, json) == reference(e, 1, 2, json));
      e.detail = "flags=O_RDWR \"held\"\n\x01 (inherited)";
      e.result = -1;
      e.error = 0;
      CHECK(fast(e, 1, 2, json) == reference(e, 1, 2, json));
    }
  }
  TraceEvent e;
  e.operation = "write";
  e.fd = 3;
  e.path = "/ckpt/a.safetensors";
  e.result = 4000;
  e.numbers = write_numbers;
  e.number_count = 2;
  CHECK(fast(e, 8089, 8089, false) ==
        "appendguard: trace: pid=8089 tid=8089 write fd=3 /ckpt/a.safetensors bytes=64 offset=6399936 -> "
        "4000\n");  // The time of the line (report --html): before the detail in text, a member in JSON, the
                    // same both ways.
  e.time_us = 1764871234000042ULL;
  CHECK(
      fast(e, 8089, 8089, false) ==
      "appendguard: trace: pid=8089 tid=8089 write fd=3 /ckpt/a.safetensors time=1764871234.000042 bytes=64 "
      "offset=6399936 -> 4000\n");
  CHECK(fast(e, 8089, 8089, false) == reference(e, 8089, 8089, false));
  CHECK(fast(e, 8089, 8089, true) == reference(e, 8089, 8089, true));
  CHECK(fast(e, 8089, 8089, true).find(",\"result\":4000,\"time\":1764871234.000042}\n") !=
        std::string::npos);
}

namespace {

std::vector<std::string> g_batches;
bool g_writer_refuses = false;
int g_reentered_outcome = -1;  // what a trace from inside the writer got (a signal handler's view)

bool capture(std::string_view text) {
  if (g_reentered_outcome == -2) {
    TraceEvent e;
    e.operation = "write";
    e.path = "/from/a/handler";
    g_reentered_outcome = static_cast<int>(buffer_trace(e, false));
  }
  if (g_writer_refuses) return false;
  g_batches.emplace_back(text);
  return true;
}

TraceEvent event(const char* operation, int fd) {
  TraceEvent e;
  e.operation = operation;
  e.fd = fd;
  e.path = "/ckpt/a.safetensors";
  return e;
}

std::string joined() {
  std::string all;
  for (const std::string& b : g_batches) all += b;
  return all;
}

std::string expected_line(const char* operation, int fd) {
  return reference(event(operation, fd), static_cast<pid_t>(getpid()),
                   static_cast<pid_t>(syscall(SYS_gettid)), false);
}

}  // namespace

// One test case, in order: the buffers are process-wide (and the last step stops buffering for good).
TEST_CASE("trace buffers: batches, flush points, thread exit, fork, reentry and the exit flush") {
  configure_trace_buffers(capture, false);

  // Lines stay in the thread's block until a flush, in order.
  for (int fd = 0; fd < 10; ++fd) CHECK(buffer_trace(event("write", fd), false) == TraceOutcome::kBuffered);
  CHECK(g_batches.empty());
  flush_own_trace();
  REQUIRE(g_batches.size() == 1);
  std::string want;
  for (int fd = 0; fd < 10; ++fd) want += expected_line("write", fd);
  CHECK(g_batches[0] == want);

  // The head of a line (up to the path) is reused for the next line of the same operation, descriptor
  // and path text, and only for it: a path changed in place, another descriptor or operation is new.
  g_batches.clear();
  char path[] = "/ckpt/a.safetensors";
  TraceEvent same = event("write", 4);
  same.path = path;
  buffer_trace(same, false);
  buffer_trace(same, false);
  path[6] = 'b';
  buffer_trace(same, false);
  same.fd = 5;
  buffer_trace(same, false);
  same.operation = "pwrite64";
  buffer_trace(same, false);
  flush_own_trace();
  pid_t pid = getpid();
  auto tid = static_cast<pid_t>(syscall(SYS_gettid));
  std::string a_line = reference(event("write", 4), pid, tid, false);
  std::string b_line = a_line;
  b_line.replace(b_line.find("/ckpt/a"), 7, "/ckpt/b");
  TraceEvent b5 = event("write", 5);
  b5.path = "/ckpt/b.safetensors";
  std::string b5_line = reference(b5, pid, tid, false);
  b5.operation = "pwrite64";
  CHECK(joined() == a_line + a_line + b_line + b5_line + reference(b5, pid, tid, false));

  // A flush point writes its line and those before it at once.
  g_batches.clear();
  buffer_trace(event("write", 1), false);
  buffer_trace(event("close", 1), true);
  REQUIRE(g_batches.size() == 1);
  CHECK(g_batches[0] == expected_line("write", 1) + expected_line("close", 1));

  // A full block is written out as one batch, before the line that does not fit; nothing is lost.
  g_batches.clear();
  size_t line = expected_line("write", 7).size();
  size_t lines = 5 * sizeof(TraceBlock::data) / 2 / line;  // two blocks and a half
  for (size_t i = 0; i < lines; ++i) buffer_trace(event("write", 7), false);
  CHECK(g_batches.size() == 2);
  for (const std::string& b : g_batches) CHECK(b.size() > sizeof(TraceBlock::data) - line);
  flush_own_trace();
  CHECK(joined().size() == lines * line);

  // A writer that cannot write now (this thread is reporting) keeps the lines for the next flush.
  g_batches.clear();
  buffer_trace(event("write", 2), false);
  g_writer_refuses = true;
  flush_own_trace();
  g_writer_refuses = false;
  CHECK(g_batches.empty());
  flush_every_trace();
  CHECK(joined() == expected_line("write", 2));

  // A trace from a signal handler that interrupted this thread's use of its block (here: from inside
  // the writer, which runs with the block held) is not put into the block.
  g_batches.clear();
  buffer_trace(event("write", 3), false);
  g_reentered_outcome = -2;
  flush_own_trace();
  CHECK(g_reentered_outcome == static_cast<int>(TraceOutcome::kWriteDirectly));
  CHECK(joined() == expected_line("write", 3));

  // A thread's lines are written when it exits, with its own tid.
  g_batches.clear();
  pid_t thread_tid = 0;
  std::thread worker([&] {
    thread_tid = static_cast<pid_t>(syscall(SYS_gettid));
    buffer_trace(event("pwrite64", 4), false);
    buffer_trace(event("pwrite64", 5), false);
  });
  worker.join();
  REQUIRE(g_batches.size() == 1);
  CHECK(g_batches[0] == reference(event("pwrite64", 4), getpid(), thread_tid, false) +
                            reference(event("pwrite64", 5), getpid(), thread_tid, false));

  // Every thread's block, before a violation report: a thread still running included.
  g_batches.clear();
  std::atomic<int> step{0};
  std::thread running([&] {
    buffer_trace(event("write", 6), false);
    step = 1;
    while (step != 2) std::this_thread::yield();
  });
  while (step != 1) std::this_thread::yield();
  buffer_trace(event("write", 8), false);
  flush_every_trace();
  step = 2;
  running.join();
  CHECK(joined().find("write fd=6 ") != std::string::npos);
  CHECK(joined().find("write fd=8 ") != std::string::npos);

  // The child of fork: the parent's buffered lines are not its own to write.
  g_batches.clear();
  buffer_trace(event("write", 9), false);
  trace_buffers_after_fork_child();  // as the child would (the parent's lines are dropped here)
  flush_own_trace();
  CHECK(g_batches.empty());

  // At exit: every block written, then lines are written one by one by the caller.
  buffer_trace(event("write", 10), false);
  stop_trace_buffering();
  CHECK(joined() == expected_line("write", 10));
  CHECK(buffer_trace(event("write", 11), false) == TraceOutcome::kWriteDirectly);
}

TEST_CASE("the trace flush points") {
  for (const char* op : {"close", "fclose", "fsync", "fdatasync", "close_range", "closefrom"}) {
    CHECK(is_trace_flush_point(op));
  }
  for (const char* op : {"write", "pwrite64", "lseek64", "open", "fopen", "ftruncate", "closed", "f"}) {
    CHECK_FALSE(is_trace_flush_point(op));
  }
}

TEST_CASE("a path of control bytes is cut in the same place by both formatters, and the line keeps its end") {
  // Issue 24, item 10: 3.5 KB of control bytes became 14-21 KB escaped, over the line buffer: the line lost
  // its newline and the next line (a violation report) was glued onto it.
  std::string path = "/ckpt/";
  for (int i = 0; i < 3500; ++i) path.push_back(static_cast<char>(1 + i % 30));
  path += ".safetensors";
  TraceEvent e;
  e.operation = "write";
  e.fd = 3;
  e.path = path.c_str();
  e.detail = "bytes=1";
  for (bool json : {false, true}) {
    std::string line = reference(e, 1, 2, json);
    CHECK(line == fast(e, 1, 2, json));
    CHECK(line.size() < 2048 + kMaxEscapedText);  // fits the line buffer of report.cpp
    CHECK(line.find("...[+") != std::string::npos);
    CHECK(line.back() == '\n');
    CHECK(std::count(line.begin(), line.end(), '\n') == 1);
  }
}
