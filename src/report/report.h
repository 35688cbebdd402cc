// Violation reports and trace lines. A violation report is one block: a first line that says what
// happened, how and where the file was opened, the process, and the native and Python stacks.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/config.h"
#include "core/file_table.h"
#include "core/violation_outcome.h"
#include "report/backtrace.h"
#include "report/text_buffer.h"

namespace appendguard {

struct Violation {
  const char* operation = "";  // the libc name, e.g. "pwrite64"
  int fd = -1;
  const char* path = "";
  const Description* description = nullptr;  // how it was opened; may be null (truncate by path)
  bool has_count = true;
  uint64_t count = 0;
  bool has_offset = true;
  int64_t offset = 0;  // where the program wrote (or the length asked, for truncate)
  uint64_t end_of_file = 0;
  const char* why = "";  // one sentence
  Outcome outcome = Outcome::kRefused;
  int error = 0;
  uint64_t landing_offset = 0;
  // Audit mode: enforce mode would fix this by itself (a read-write or plain write-only open it rewrites,
  // a growing preallocation it defers); otherwise the program needs a code change.
  bool fixed_by_enforce = false;
  // A write at the position, not at the end: where the program moved the position away from the end,
  // if a seek did (null otherwise, or when nothing was recorded).
  const SeekSite* left_end_at = nullptr;

  Violation& with_count(uint64_t bytes) {
    has_count = true;
    count = bytes;
    return *this;
  }
  Violation& with_offset(int64_t where) {
    has_offset = true;
    offset = where;
    return *this;
  }
};

struct ProcessIdentity {
  pid_t pid = 0;
  pid_t tid = 0;
  const char* program = "";
  const char* rank = "0";
  const char* host = "unknown";
};

// The text of a report without the stacks (pure; unit-tested).
void format_violation(TextBuffer& out, const Violation& v, const ProcessIdentity& who);
// "  the position left the end at: lseek64(offset 0, SEEK_SET) -> 0, end of file 100, tid 7\n" (pure).
void format_seek_site_heading(TextBuffer& out, const SeekSite& site);
// With a log file, the line said on stderr at the first refusal of each process, so that the job's own
// output shows why its call failed: "appendguard: refused pwrite64 on /mnt/a.safetensors (EOPNOTSUPP):
// report in /logs/ag-0.log (this process's later refusals: only there)\n" (pure).
void format_refusal_pointer(TextBuffer& out, const Violation& v, std::string_view log_path);
// The line after a native stack that says which frames were left out (pure; nothing when none were).
void format_frames_left_out(TextBuffer& out, int libc_above, int below, bool python_shown);

// A number of a trace line's detail, written "name=value" (the write and seek lines: no printf).
struct TraceNumber {
  const char* name = "";
  size_t name_length = 0;
  unsigned long long bits = 0;  // the value (a signed one as its two's complement)
  bool is_signed = false;
};

// One trace line: "appendguard: trace: ...".
struct TraceEvent {
  const char* operation = "";
  int fd = -1;
  const char* path = "";
  const char* detail = "";  // flags, offsets: preformatted by the caller (after the numbers, if any)
  long long result = 0;
  int error = 0;                         // errno when result < 0
  const TraceNumber* numbers = nullptr;  // the detail's first part: "name=value" joined by spaces
  int number_count = 0;
  // When it happened: microseconds since the epoch (CLOCK_REALTIME), written "time=S.UUUUUU" before the
  // detail (text) or "time":S.UUUUUU (JSON); 0: not written.
  unsigned long long time_us = 0;
};
void format_trace(TextBuffer& out, const TraceEvent& e, const ProcessIdentity& who);
// The detail as format_trace writes it: the numbers, then `detail`.
void format_trace_detail(TextBuffer& out, const TraceEvent& e);

// The stacks of a report, as the text format's lines (empty: left out).
struct ReportStacks {
  std::string_view python;
  std::string_view native;
  int native_libc_above = 0;  // frames left out of `native` (format_frames_left_out)
  int native_below = 0;
  std::string_view opened_at;
  const SeekSite* left_end_at = nullptr;  // recorded (Violation::left_end_at); its Python lines are its own
  std::string_view left_end_at_native;
};
// APPENDGUARD_FORMAT=json: the same as one JSON object on one line (fields in docs/reference.md). Pure;
// unit-tested.
void format_violation_json(TextBuffer& out, const Violation& v, const ProcessIdentity& who,
                           const ReportStacks& stacks);
void format_trace_json(TextBuffer& out, const TraceEvent& e, const ProcessIdentity& who);

// The process-wide reporter: writes to the configured sink, adds stacks per configuration.
void configure_reporter(const Config& config);
void report_violation(const Violation& v);
// A trace line, into this thread's trace buffer (report/trace_buffer.h), written to the log in batches.
void report_trace(const TraceEvent& e);
// Writes every thread's buffered trace lines (before a violation report or a notice, before exec); a
// thread's own are written at its close and fsync of a guarded file. Never waits for long (trace_buffer.h).
void flush_all_traces();
// At exit (atexit, after the handlers that trace): everything buffered is written, and trace lines from
// then on are written one by one.
void flush_traces_at_exit();
// For the open site kept in each description: the number of frames, or kSiteNotRecorded when libunwind
// was not loaded yet and could not be loaded there (a signal handler: report/backtrace.h load_unwinder).
// `hook_cfa`: the open hook's canonical frame address, or 0 (report/backtrace.h capture_addresses).
constexpr int kSiteNotRecorded = -1;
// Set by configure_reporter: the frames a stack keeps (APPENDGUARD_BACKTRACE), and the scope of a native
// stack (kWhole with APPENDGUARD_TRACE=1, else kCulprit).
extern APPENDGUARD_HIDDEN int g_backtrace_frames;
extern APPENDGUARD_HIDDEN StackScope g_native_scope;
// capture_open_site before libunwind is loaded, or with no frames wanted.
int capture_open_site_slowly(void** frames, int max_frames, uintptr_t hook_cfa);
// Inline: every guarded open asks, and once libunwind is loaded it reads its site back (report/backtrace.h
// capture_loaded_addresses) after two tests (issue 27: a call of its own).
inline int capture_open_site(void** frames, int max_frames, uintptr_t hook_cfa = 0) {
  const int wanted = max_frames < g_backtrace_frames ? max_frames : g_backtrace_frames;
  if (__builtin_expect(wanted > 0 && unwinder_loaded(), 1))
    return capture_loaded_addresses(frames, wanted, g_native_scope, hook_cfa);
  return capture_open_site_slowly(frames, max_frames, hook_cfa);
}
// libunwind, loaded if it is not yet and may be here (not in a signal handler, not where `may_load`, set
// by the shim at start-up, says no: a child sharing its parent's memory). Holding none of our locks.
bool unwinder_ready();
void set_unwinder_loading_check(bool (*may_load)());
// For the seek site kept in each description: the native stack of the caller and, in a Python thread,
// its innermost Python frames (taking the GIL: call it holding no lock). Not inside a signal handler's
// Python, and nothing when APPENDGUARD_BACKTRACE=0 and APPENDGUARD_PYTHON_STACK=0.
void record_seek_site(SeekSite& site, const char* function, int64_t offset, int whence, uint64_t position,
                      uint64_t end_of_file);
// In the child of fork(): a thread that was reporting does not exist there, so its lock is released.
void reset_reporter_after_fork();
// A message that is not a violation ("appendguard: ..."), e.g. a descriptor we could not track.
void report_notice(const char* text);
// A line already formatted (ending with a newline), e.g. the summary at exit.
void report_line(std::string_view text);
bool reporting_json();  // APPENDGUARD_FORMAT=json

}  // namespace appendguard
