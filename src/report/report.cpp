#include "report/report.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "core/open_flags.h"
#include "report/backtrace.h"
#include "report/escape.h"
#include "report/log_sink.h"
#include "report/python_stack.h"
#include "report/scratch.h"
#include "report/summary.h"
#include "report/trace_buffer.h"

namespace appendguard {
namespace {

constinit LogSink g_sink;
constinit Lock g_report_lock;
int g_backtrace_frames = 32;
bool g_python_stack = true;
char g_report_text[64 * 1024];
// Set while this thread holds the report lock: a signal handler whose call is refused while its thread
// is writing a report must not wait for that lock (it would never be released).
__attribute__((tls_model("initial-exec"))) constinit thread_local bool t_reporting = false;

// The report lock, unless this thread holds it already (see t_reporting): then the report is reduced to
// one line written straight to stderr, and the caller writes nothing more.
class ReportLock {
 public:
  ReportLock() : reentered_(t_reporting) {
    if (reentered_) return;
    g_report_lock.lock();
    t_reporting = true;
  }
  ~ReportLock() {
    if (reentered_) return;
    t_reporting = false;
    g_report_lock.unlock();
  }
  ReportLock(const ReportLock&) = delete;
  ReportLock& operator=(const ReportLock&) = delete;
  bool reentered() const { return reentered_; }

 private:
  bool reentered_;
};

void write_reentered_line(std::string_view first_line) {
  static constexpr char kSuffix[] =
      " (a signal handler interrupted a report of this thread: reported briefly)\n";
  size_t n = first_line.find('\n');
  if (n == std::string_view::npos) n = first_line.size();
  syscall(SYS_write, STDERR_FILENO, first_line.data(), n);
  syscall(SYS_write, STDERR_FILENO, kSuffix, sizeof kSuffix - 1);
}

// Out of line, so that its buffer is not in report_violation's frame (the report's stack budget).
__attribute__((noinline)) void report_violation_briefly(const Violation& v, const ProcessIdentity& who);

char g_line_text[1024 + kMaxPath];  // trace lines and notices, under g_report_lock
char g_stack_text[32768];           // APPENDGUARD_FORMAT=json: the stacks' text, under g_report_lock
bool g_json = false;                // APPENDGUARD_FORMAT=json
CapturedStack g_no_stack;           // only read, when no scratch could be mapped

const char* outcome_text(Outcome outcome) {
  switch (outcome) {
    case Outcome::kRefused:
      return "refused";
    case Outcome::kAborted:
      return "aborting the process";
    case Outcome::kLetThrough:
      return "let through (APPENDGUARD_ON_VIOLATION=warn)";
    case Outcome::kAuditOnly:
      return "allowed (audit mode): this would fail on an append-only mount";
    case Outcome::kKernelRefuses:
      return "the call fails";
  }
  return "";
}

ProcessIdentity current_identity() {
  static char program[256];
  if (program[0] == '\0') {
    long n = syscall(SYS_readlink, "/proc/self/exe", program, sizeof program - 1);
    if (n > 0) program[n] = '\0';
  }
  ProcessIdentity who;
  who.pid = static_cast<pid_t>(syscall(SYS_getpid));
  who.tid = static_cast<pid_t>(syscall(SYS_gettid));
  who.program = program;
  who.rank = rank_from_environment();
  static char host[256];
  if (host[0] == '\0' && gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown");
  who.host = host;
  return who;
}

// libunwind's stepping and symbol lookup take about 8 KiB of stack (measured, docs/design.md): on a
// sigaltstack with less left than this the native stacks are left out, rather than overflowing it.
constexpr size_t kUnwinderStack = size_t{12} * 1024;

// The bytes left below us on the signal stack we run on, or SIZE_MAX when not on one.
size_t signal_stack_left() {
  stack_t ss{};
  if (syscall(SYS_sigaltstack, nullptr, &ss) != 0 || !(ss.ss_flags & SS_ONSTACK)) return SIZE_MAX;
  char here = 0;
  auto sp = reinterpret_cast<uintptr_t>(&here);
  auto base = reinterpret_cast<uintptr_t>(ss.ss_sp);
  return sp > base ? sp - base : 0;
}

}  // namespace

void format_violation(TextBuffer& out, const Violation& v, const ProcessIdentity& who) {
  out.add("appendguard: violation: {} ", v.operation);
  add_escaped_path(out, v.path);
  out.add(" fd={}", v.fd);
  if (v.has_count) out.add(" bytes={}", v.count);
  if (v.has_offset) out.add(" offset={}", v.offset);
  out.add(" end_of_file={}: {}", v.end_of_file, outcome_text(v.outcome));
  if (v.outcome == Outcome::kRefused || v.outcome == Outcome::kKernelRefuses) {
    out.add(" ({})", errno_name(v.error));
  }
  if (v.outcome == Outcome::kLetThrough) out.add("; the bytes land at offset {}", v.landing_offset);
  if (v.outcome == Outcome::kAuditOnly) {
    out.add_text(v.fixed_by_enforce ? "; fixed by enforce mode" : "; needs a code change");
  }
  out.add("; pid {} rank {} host {}", who.pid, who.rank, who.host);
  out.add("\n  why: {}\n", v.why);
  if (const Description* d = v.description) {
    char original[160];
    char effective[160];
    format_open_flags(d->site.original_flags, original, sizeof original);
    format_open_flags(d->site.effective_flags, effective, sizeof effective);
    out.add("  opened: {}(", d->site.function);
    add_escaped_path(out, d->path, true);
    out.add(", {})", original);
    if (d->site.original_flags != d->site.effective_flags) {
      out.add(", rewritten to {}", effective);
    }
    if (d->site.written_back > 0) {
      out.add(" (the file's {} existing bytes read first and written back)", d->site.written_back);
    }
    if (d->site.reused_held) out.add_text(", answered with the descriptor held since its first open");
    out.add(" by pid {} tid {}\n", d->site.pid, d->site.tid);
  }
  out.add("  process: pid {} tid {} rank {} program ", who.pid, who.tid, who.rank);
  add_escaped_path(out, who.program);
  out.add_text("\n");
}

namespace {

const char* outcome_word(Outcome outcome) {
  switch (outcome) {
    case Outcome::kRefused:
      return "refused";
    case Outcome::kAborted:
      return "aborted";
    case Outcome::kLetThrough:
      return "let_through";
    case Outcome::kAuditOnly:
      return "audit";
    case Outcome::kKernelRefuses:
      return "kernel_refuses";
  }
  return "";
}

}  // namespace

void format_violation_json(TextBuffer& out, const Violation& v, const ProcessIdentity& who,
                           std::string_view native_stack, std::string_view python_stack,
                           std::string_view opened_at) {
  out.add_text("{\"type\":\"violation\",\"operation\":");
  add_json_string(out, v.operation);
  out.add_text(",\"path\":");
  add_json_string(out, v.path);
  out.add(",\"fd\":{}", v.fd);
  if (v.has_count) out.add(",\"bytes\":{}", v.count);
  if (v.has_offset) out.add(",\"offset\":{}", v.offset);
  out.add(",\"end_of_file\":{},\"outcome\":\"{}\"", v.end_of_file, outcome_word(v.outcome));
  if (v.outcome == Outcome::kRefused || v.outcome == Outcome::kKernelRefuses) {
    out.add(",\"errno\":\"{}\"", errno_name(v.error));
  }
  if (v.outcome == Outcome::kLetThrough) out.add(",\"landing_offset\":{}", v.landing_offset);
  if (v.outcome == Outcome::kAuditOnly) {
    out.add(",\"finding\":\"{}\"", v.fixed_by_enforce ? "fixed by enforce mode" : "needs a code change");
  }
  out.add_text(",\"why\":");
  add_json_string(out, v.why);
  if (const Description* d = v.description) {
    char original[160];
    char effective[160];
    format_open_flags(d->site.original_flags, original, sizeof original);
    format_open_flags(d->site.effective_flags, effective, sizeof effective);
    out.add(
        ",\"opened\":{{\"function\":\"{}\",\"flags\":\"{}\",\"effective_flags\":\"{}\",\"written_back\":{},"
        "\"reused_held\":{},\"pid\":{},\"tid\":{}}}",
        d->site.function, original, effective, d->site.written_back, d->site.reused_held, d->site.pid,
        d->site.tid);
  }
  out.add(",\"pid\":{},\"tid\":{},\"rank\":", who.pid, who.tid);
  add_json_string(out, who.rank);
  out.add_text(",\"host\":");
  add_json_string(out, who.host);
  out.add_text(",\"program\":");
  add_json_string(out, who.program);
  if (!native_stack.empty()) {
    out.add_text(",\"native_stack\":");
    add_json_lines(out, native_stack);
  }
  if (!python_stack.empty()) {
    out.add_text(",\"python_stack\":");
    add_json_lines(out, python_stack);
  }
  if (!opened_at.empty()) {
    out.add_text(",\"opened_at\":");
    add_json_lines(out, opened_at);
  }
  out.add_text("}\n");
}

void format_trace_json(TextBuffer& out, const TraceEvent& e, const ProcessIdentity& who) {
  out.add("{{\"type\":\"trace\",\"pid\":{},\"tid\":{},\"operation\":\"{}\",\"fd\":{},\"path\":", who.pid,
          who.tid, e.operation, e.fd);
  add_json_string(out, e.path);
  out.add_text(",\"detail\":");
  if (e.number_count == 0) {
    add_json_string(out, e.detail);
  } else {
    char text[1024];
    TextBuffer detail(text, sizeof text);
    format_trace_detail(detail, e);
    add_json_string(out, detail.view());
  }
  out.add(",\"result\":{}", e.result < 0 ? -1 : e.result);
  if (e.result < 0) out.add(",\"errno\":\"{}\"", errno_name(e.error));
  out.add_text("}\n");
}

void format_trace_detail(TextBuffer& out, const TraceEvent& e) {
  for (int i = 0; i < e.number_count; ++i) {
    const TraceNumber& number = e.numbers[i];
    if (i > 0) out.add_text(" ");
    if (number.is_signed) {
      out.add("{}={}", std::string_view(number.name, number.name_length),
              static_cast<long long>(number.bits));
    } else {
      out.add("{}={}", std::string_view(number.name, number.name_length), number.bits);
    }
  }
  out.add_text(e.detail);
}

void format_trace(TextBuffer& out, const TraceEvent& e, const ProcessIdentity& who) {
  out.add("appendguard: trace: pid={} tid={} {} fd={} ", who.pid, who.tid, e.operation, e.fd);
  add_escaped_path(out, e.path);
  out.add_text(" ");
  format_trace_detail(out, e);
  if (e.result < 0) {
    out.add(" -> -1 {}\n", errno_name(e.error));
  } else {
    out.add(" -> {}\n", e.result);
  }
}

namespace {

// Trace batches go to the log under the report lock, unless this thread holds it (a signal handler
// interrupted its report): then they stay in their block.
bool write_trace_batch(std::string_view text) {
  ReportLock guard;
  if (guard.reentered()) return false;
  g_sink.write(text);
  return true;
}

}  // namespace

void configure_reporter(const Config& config) {
  g_sink.configure(config.log_target.c_str());
  g_backtrace_frames = config.backtrace_frames;
  g_python_stack = config.python_stack;
  g_json = config.json;
  if (config.trace) configure_trace_buffers(write_trace_batch, config.json);
  init_report_scratch();
  if (g_backtrace_frames > 0) load_unwinder();
}

int capture_open_site(void** frames, int max_frames) {
  if (g_backtrace_frames <= 0) return 0;
  return capture_addresses(frames, max_frames < g_backtrace_frames ? max_frames : g_backtrace_frames, 2);
}

void report_violation(const Violation& v) {
  if (v.outcome == Outcome::kAuditOnly && v.fixed_by_enforce) {
    count_event(g_summary.fixed_by_enforce);
  } else {
    count_event(g_summary.violations);
  }
  if (v.outcome == Outcome::kRefused && v.has_count) count_event(g_summary.refused_bytes, v.count);
  flush_all_traces();  // the trace lines before this report come before it in the log
  // The stacks are captured into per-thread scratch memory, not onto the stack (docs/design.md).
  ScratchLease lease;
  ReportScratch* scratch = lease.get();
  CapturedStack& stack = scratch ? scratch->stack : g_no_stack;
  size_t stack_left = g_backtrace_frames > 0 ? signal_stack_left() : SIZE_MAX;
  bool unwind = scratch && stack_left >= kUnwinderStack;
  if (unwind) capture_stack(stack, g_backtrace_frames, 2, scratch->unwind);
  // Read before taking the report lock: it may wait for the GIL, whose holder may be reporting too.
  TextBuffer python(scratch ? scratch->python_text : nullptr, scratch ? sizeof scratch->python_text : 0);
  bool has_python = scratch && g_python_stack && !stack.in_signal_handler && format_python_stack(python, 32);

  ProcessIdentity who = current_identity();
  ReportLock guard;
  if (guard.reentered()) return report_violation_briefly(v, who);
  TextBuffer out(g_report_text, sizeof g_report_text);
  if (g_json) {
    TextBuffer native(g_stack_text, sizeof g_stack_text / 2);
    TextBuffer opened(g_stack_text + sizeof g_stack_text / 2, sizeof g_stack_text / 2);
    if (g_backtrace_frames > 0 && unwind)
      format_stack(native, stack.frames, stack.count, stack.in_signal_handler);
    if (const Description* d = v.description; unwind && d && d->site.frame_count > 0) {
      format_stack(opened, d->site.frames, d->site.frame_count, stack.in_signal_handler);
    }
    format_violation_json(out, v, who, native.view(), has_python ? python.view() : std::string_view(),
                          opened.view());
    return g_sink.write(out.view());
  }
  format_violation(out, v, who);
  if (g_backtrace_frames > 0 && !unwind) {
    out.add("  native stack: left out ({} bytes of signal stack left, the unwinder needs {})\n", stack_left,
            kUnwinderStack);
  } else if (g_backtrace_frames > 0) {
    out.add_text("  native stack:\n");
    format_stack(out, stack.frames, stack.count, stack.in_signal_handler);
  }
  if (has_python) {
    out.add_text("  python stack (most recent call first):\n");
    out.add_text(python.view());
  }
  if (const Description* d = v.description; unwind && d && d->site.frame_count > 0) {
    out.add_text("  opened at:\n");
    format_stack(out, d->site.frames, d->site.frame_count, stack.in_signal_handler);
  }
  if (out.full()) out.add_text("\n  (report truncated)\n");
  g_sink.write(out.view());
}

namespace {

void report_violation_briefly(const Violation& v, const ProcessIdentity& who) {
  char line[1024];  // the first line, cut if need be
  TextBuffer brief(line, sizeof line);
  format_violation(brief, v, who);
  write_reentered_line(brief.view());
}

}  // namespace

void report_trace(const TraceEvent& e) {
  if (t_reporting) return;  // a trace line from a handler that interrupted a report: dropped
  if (buffer_trace(e, is_trace_flush_point(e.operation)) == TraceOutcome::kBuffered) return;
  // Written by itself, after the exit flush, for a line longer than a block, or from a signal handler that
  // interrupted this thread's own trace (trace_buffer.h).
  ProcessIdentity who = current_identity();
  ReportLock guard;
  if (guard.reentered()) return;  // a trace line from a handler that interrupted a report: dropped
  TextBuffer out(g_line_text, sizeof g_line_text);
  if (g_json) {
    format_trace_json(out, e, who);
  } else {
    format_trace(out, e, who);
  }
  g_sink.write(out.view());
}

void flush_all_traces() {
  if (!t_reporting) flush_every_trace();
}

void flush_traces_at_exit() {
  stop_trace_buffering();
}

void reset_reporter_after_fork() {
  g_report_lock.reset_in_child();
  t_reporting = false;
  trace_buffers_after_fork_child();
  unwinder_after_fork_child();
  python_stack_after_fork_child();
}

bool reporting_json() {
  return g_json;
}

void report_line(std::string_view text) {
  ReportLock guard;
  if (guard.reentered()) return write_reentered_line(text);
  g_sink.write(text);
}

void report_notice(const char* message) {
  flush_all_traces();  // as for a violation: the trace lines before the notice come before it
  ReportLock guard;
  if (guard.reentered()) {  // g_line_text is the interrupted report's
    char line[512];
    TextBuffer brief(line, sizeof line);
    brief.add("appendguard: {}\n", message);
    return write_reentered_line(brief.view());
  }
  TextBuffer out(g_line_text, sizeof g_line_text);
  if (g_json) {
    out.add_text("{\"type\":\"notice\",\"message\":");
    add_json_string(out, message);
    out.add_text("}\n");
  } else {
    out.add("appendguard: {}\n", message);
  }
  g_sink.write(out.view());
}

}  // namespace appendguard
