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
#include "report/site_stack.h"
#include "report/summary.h"
#include "report/trace_buffer.h"

namespace appendguard {

int g_backtrace_frames = 32;
StackScope g_native_scope = StackScope::kCulprit;

namespace {

constinit LogSink g_sink;
pid_t g_pointed_at_log = 0;  // the process whose first refusal was said on stderr (point_stderr_at_log)
constinit Lock g_report_lock;
bool (*g_may_load_unwinder)() = nullptr;  // set_unwinder_loading_check
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

char g_line_text[2048 + kMaxEscapedText];  // trace lines and notices, under g_report_lock
char g_stack_text[3][12 * 1024];           // APPENDGUARD_FORMAT=json: the stacks' text, under g_report_lock
bool g_json = false;                       // APPENDGUARD_FORMAT=json
CapturedStack g_no_stack;                  // only read, when no scratch could be mapped

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
  out.add_text("appendguard: violation: ");
  add_one_line(out, v.operation);
  out.add_text(" ");
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
  out.add("; pid {} rank ", who.pid);
  add_escaped_path(out, who.rank);  // RANK and the host name come from outside: they cannot forge a line
  out.add_text(" host ");
  add_escaped_path(out, who.host);
  out.add_text("\n  why: ");
  add_one_line(out, v.why);
  out.add_text("\n");
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
  out.add("  process: pid {} tid {} rank ", who.pid, who.tid);
  add_escaped_path(out, who.rank);
  out.add_text(" program ");
  add_escaped_path(out, who.program);
  out.add_text("\n");
}

namespace {

const char* whence_name(int whence) {
  switch (whence) {
    case SEEK_SET:
      return "SEEK_SET";
    case SEEK_CUR:
      return "SEEK_CUR";
    case SEEK_END:
      return "SEEK_END";
    case SEEK_DATA:
      return "SEEK_DATA";
    case SEEK_HOLE:
      return "SEEK_HOLE";
    default:
      return nullptr;
  }
}

void add_whence(TextBuffer& out, int whence) {
  if (const char* name = whence_name(whence)) {
    out.add_text(name);
  } else {
    out.add("{}", whence);
  }
}

}  // namespace

void format_seek_site_heading(TextBuffer& out, const SeekSite& site) {
  out.add("  the position left the end at: {}(offset {}, ", site.function, site.offset);
  add_whence(out, site.whence);
  out.add(") -> {}, end of file {}, tid {}\n", site.position, site.end_of_file, site.tid);
}

void format_refusal_pointer(TextBuffer& out, const Violation& v, std::string_view log_path) {
  const bool aborts = v.outcome == Outcome::kAborted;
  out.add("appendguard: {} {} on ", aborts ? "aborting at" : "refused", v.operation);
  add_escaped_path(out, v.path);
  if (!aborts) out.add(" ({})", errno_name(v.error));
  out.add_text(": report in ");
  add_escaped_path(out, log_path);
  out.add_text(aborts ? "\n" : " (this process's later refusals: only there)\n");
  out.end_line();
}

void format_frames_left_out(TextBuffer& out, int libc_above, int below, bool python_shown) {
  if (libc_above <= 0 && below <= 0) return;
  out.add_text("    (not shown:");
  if (libc_above > 0)
    out.add(" {} frame{} of libc above #0{}", libc_above, libc_above == 1 ? "" : "s", below > 0 ? "," : "");
  if (below > 0) {
    out.add(" {} frame{} below, {}", below, below == 1 ? "" : "s",
            python_shown ? "the Python interpreter's and its callers' (the python stack says where)"
                         : "the thread's start");
  }
  out.add_text("; APPENDGUARD_TRACE=1 shows them)\n");
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
                           const ReportStacks& stacks) {
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
  if (!stacks.python.empty()) {
    out.add_text(",\"python_stack\":");
    add_json_lines(out, stacks.python);
  }
  if (!stacks.native.empty()) {
    out.add_text(",\"native_stack\":");
    add_json_lines(out, stacks.native);
    if (stacks.native_libc_above > 0 || stacks.native_below > 0) {
      out.add(",\"native_stack_left_out\":{{\"libc_above\":{},\"below\":{}}}", stacks.native_libc_above,
              stacks.native_below);
    }
  }
  if (const SeekSite* seek = stacks.left_end_at) {
    out.add_text(",\"left_end_at\":{\"operation\":");
    add_json_string(out, seek->function);
    out.add(",\"offset\":{},\"whence\":", seek->offset);
    if (const char* name = whence_name(seek->whence)) {
      out.add("\"{}\"", name);
    } else {
      out.add("{}", seek->whence);
    }
    out.add(",\"position\":{},\"end_of_file\":{},\"tid\":{}", seek->position, seek->end_of_file, seek->tid);
    std::string_view python(seek->python, seek->python_size <= sizeof seek->python ? seek->python_size : 0);
    if (!python.empty()) {
      out.add_text(",\"python_stack\":");
      add_json_lines(out, python);
    }
    if (!stacks.left_end_at_native.empty()) {
      out.add_text(",\"native_stack\":");
      add_json_lines(out, stacks.left_end_at_native);
    }
    out.add_text("}");
  }
  if (!stacks.opened_at.empty()) {
    out.add_text(",\"opened_at\":");
    add_json_lines(out, stacks.opened_at);
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
  if (e.time_us != 0) out.add(",\"time\":{}.{:06}", e.time_us / 1000000, e.time_us % 1000000);
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
  if (e.time_us != 0) out.add("time={}.{:06} ", e.time_us / 1000000, e.time_us % 1000000);
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
  g_native_scope = config.trace ? StackScope::kWhole : StackScope::kCulprit;
  g_json = config.json;
  if (config.trace) configure_trace_buffers(write_trace_batch, config.json);
  init_report_scratch();
  init_site_stack();
  // libunwind is loaded when a stack is first needed (unwinder_ready), not here.
}

void set_unwinder_loading_check(bool (*may_load)()) {
  g_may_load_unwinder = may_load;
}

namespace {

// APPENDGUARD_TRACE=1: native stacks are kept whole; otherwise cut to the culprit (g_native_scope).
bool whole_native() {
  return g_native_scope == StackScope::kWhole;
}

// Inside a signal handler, possibly: on the signal stack, or a signal that has a handler is blocked (a
// handler runs with its own signal blocked, unless installed with SA_NODEFER). By system calls, made only
// until libunwind is loaded.
bool maybe_in_signal_handler() {
  stack_t ss{};
  if (syscall(SYS_sigaltstack, nullptr, &ss) == 0 && (ss.ss_flags & SS_ONSTACK)) return true;
  uint64_t blocked = 0;
  if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, nullptr, &blocked, sizeof blocked) != 0) return true;
  struct KernelAction {  // the kernel's struct sigaction (x86-64)
    void* handler;
    unsigned long flags;
    void* restorer;
    uint64_t mask;
  };
  for (int sig = 1; sig <= 64 && blocked != 0; ++sig) {
    if (!(blocked & (uint64_t{1} << (sig - 1)))) continue;
    KernelAction action{};
    if (syscall(SYS_rt_sigaction, sig, nullptr, &action, sizeof(uint64_t)) != 0) continue;
    if (action.handler != reinterpret_cast<void*>(SIG_DFL) &&
        action.handler != reinterpret_cast<void*>(SIG_IGN))
      return true;
  }
  return false;
}

}  // namespace

bool unwinder_ready() {
  if (__builtin_expect(unwinder_loaded(), 1)) return true;
  if (g_backtrace_frames <= 0 || unwinder_unavailable()) return false;
  // dlopen is not async-signal-safe, and a child sharing our memory (vfork) must not load for its parent.
  if ((g_may_load_unwinder && !g_may_load_unwinder()) || maybe_in_signal_handler()) return false;
  return load_unwinder();
}

int capture_open_site_slowly(void** frames, int max_frames, uintptr_t hook_cfa) {
  if (g_backtrace_frames <= 0 || max_frames <= 0) return 0;
  if (!unwinder_ready()) return unwinder_unavailable() ? 0 : kSiteNotRecorded;
  return capture_loaded_addresses(frames, max_frames < g_backtrace_frames ? max_frames : g_backtrace_frames,
                                  g_native_scope, hook_cfa);
}

void record_seek_site(SeekSite& site, const char* function, int64_t offset, int whence, uint64_t position,
                      uint64_t end_of_file) {
  site.recorded.store(false, std::memory_order_relaxed);
  site.function = function;
  site.offset = offset;
  site.whence = whence;
  site.position = position;
  site.end_of_file = end_of_file;
  site.tid = static_cast<pid_t>(syscall(SYS_gettid));
  site.frame_count = 0;
  site.reached_bottom = false;
  site.python_size = 0;
  bool in_signal_handler = false;
  if (g_backtrace_frames > 0 && signal_stack_left() >= kUnwinderStack && unwinder_ready()) {
    ScratchLease lease;
    if (ReportScratch* scratch = lease.get()) {
      int frames = g_backtrace_frames < kSeekFrames ? g_backtrace_frames : kSeekFrames;
      // In a Python thread the unwinding stops at the interpreter's loop: the Python frames tell the rest
      // (without them, the 16 frames above it do), and no signal frame below it can matter.
      capture_stack(scratch->stack, frames, 1, scratch->unwind, g_native_scope, !whole_native());
      for (int i = 0; i < scratch->stack.count; ++i) site.frames[i] = scratch->stack.frames[i];
      site.frame_count = scratch->stack.count;
      site.reached_bottom = scratch->stack.reached_bottom;
      in_signal_handler = scratch->stack.in_signal_handler;
    }
  }
  if (g_python_stack && !in_signal_handler) {
    TextBuffer python(site.python, sizeof site.python);
    if (format_python_stack(python, kSeekPythonFrames)) site.python_size = python.view().size();
  }
  site.recorded.store(true, std::memory_order_release);
}

namespace {

// What a report shows of its stacks (StackScope::kCulprit: the frames that matter, and how many were
// left out).
struct ShownStacks {
  int native_count = 0;
  int native_libc_above = 0;
  int native_below = 0;
  const SeekSite* seek = nullptr;  // recorded
  int seek_count = 0;
  int opened_count = 0;
  bool open_not_recorded = false;  // the open's site was not recorded (kSiteNotRecorded)
};

constexpr char kOpenNotRecorded[] =
    "    (not recorded: the open was made in a signal handler before libunwind was first loaded, and it "
    "cannot be loaded there)\n";

ShownStacks choose_frames(const Violation& v, const CapturedStack& stack, bool unwind, bool has_python) {
  ShownStacks shown;
  shown.native_count = stack.count;
  if (unwind && !whole_native()) {
    shown.native_count = frames_that_matter(stack.frames, stack.count, has_python, stack.reached_bottom);
    if (shown.native_count < stack.count)
      shown.native_below = stack.count - shown.native_count + stack.frames_beyond;
    shown.native_libc_above = stack.libc_frames_skipped;
  }
  if (v.left_end_at && v.left_end_at->recorded.load(std::memory_order_acquire)) shown.seek = v.left_end_at;
  if (const SeekSite* seek = shown.seek; seek && unwind) {
    shown.seek_count = seek->frame_count < kSeekFrames ? seek->frame_count : kSeekFrames;
    if (!whole_native()) {
      shown.seek_count =
          frames_that_matter(seek->frames, shown.seek_count, seek->python_size > 0, seek->reached_bottom);
    }
  }
  if (const Description* d = v.description; d && d->site.frame_count == kSiteNotRecorded)
    shown.open_not_recorded = g_backtrace_frames > 0;
  if (const Description* d = v.description; unwind && d && d->site.frame_count > 0) {
    shown.opened_count = d->site.frame_count < kOpenFrames ? d->site.frame_count : kOpenFrames;
    // Fewer frames than asked for: the capture reached the thread's start.
    bool reached_bottom =
        shown.opened_count < (g_backtrace_frames < kOpenFrames ? g_backtrace_frames : kOpenFrames);
    if (!whole_native() && shown.opened_count > 0)
      shown.opened_count = frames_that_matter(d->site.frames, shown.opened_count, has_python, reached_bottom);
  }
  return shown;
}

std::string_view seek_python(const SeekSite& seek) {
  return {seek.python, seek.python_size <= sizeof seek.python ? seek.python_size : 0};
}

// A report that went to the log file: the first refusal of this process is also one line on stderr.
void point_stderr_at_log(const Violation& v, pid_t pid) {
  if (v.outcome != Outcome::kRefused && v.outcome != Outcome::kAborted) return;
  if (g_pointed_at_log == pid) return;
  g_pointed_at_log = pid;
  char line[1024];
  TextBuffer out(line, sizeof line);
  format_refusal_pointer(out, v, g_sink.file_path());
  LogSink::write_to_stderr(out.view());
}

// APPENDGUARD_FORMAT=json, under the report lock. Out of line, so that its buffers are not in
// report_violation's frame (the report's stack budget, see kUnwinderStack).
__attribute__((noinline)) void write_json_report(const Violation& v, const ProcessIdentity& who,
                                                 const CapturedStack& stack, bool unwind,
                                                 std::string_view python, const ShownStacks& shown) {
  TextBuffer out(g_report_text, sizeof g_report_text);
  TextBuffer native(g_stack_text[0], sizeof g_stack_text[0]);
  TextBuffer opened(g_stack_text[1], sizeof g_stack_text[1]);
  TextBuffer seek_native(g_stack_text[2], sizeof g_stack_text[2]);
  if (g_backtrace_frames > 0 && unwind)
    format_stack(native, stack.frames, shown.native_count, stack.in_signal_handler);
  if (shown.opened_count > 0)
    format_stack(opened, v.description->site.frames, shown.opened_count, stack.in_signal_handler);
  if (shown.open_not_recorded) opened.add_text(kOpenNotRecorded);
  if (shown.seek_count > 0)
    format_stack(seek_native, shown.seek->frames, shown.seek_count, stack.in_signal_handler);
  ReportStacks stacks;
  stacks.python = python;
  stacks.native = native.view();
  stacks.native_libc_above = shown.native_libc_above;
  stacks.native_below = shown.native_below;
  stacks.left_end_at = shown.seek;
  stacks.left_end_at_native = seek_native.view();
  stacks.opened_at = opened.view();
  format_violation_json(out, v, who, stacks);
  if (g_sink.write(out.view())) point_stderr_at_log(v, who.pid);
}

}  // namespace

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
  if (unwind) unwinder_ready();  // loaded at the first stack needed (not on a signal stack: see above)
  if (unwind) capture_stack(stack, g_backtrace_frames, 2, scratch->unwind, g_native_scope);
  // Read before taking the report lock: it may wait for the GIL, whose holder may be reporting too.
  TextBuffer python(scratch ? scratch->python_text : nullptr, scratch ? sizeof scratch->python_text : 0);
  bool has_python = scratch && g_python_stack && !stack.in_signal_handler && format_python_stack(python, 32);
  const ShownStacks shown = choose_frames(v, stack, unwind, has_python);

  ProcessIdentity who = current_identity();
  ReportLock guard;
  if (guard.reentered()) return report_violation_briefly(v, who);
  if (g_json) return write_json_report(v, who, stack, unwind, has_python ? python.view() : "", shown);
  TextBuffer out(g_report_text, sizeof g_report_text);
  format_violation(out, v, who);
  if (has_python) {
    out.add_text("  python stack (most recent call first):\n");
    out.add_text(python.view());
  }
  if (g_backtrace_frames > 0 && !unwind) {
    out.add("  native stack: left out ({} bytes of signal stack left, the unwinder needs {})\n", stack_left,
            kUnwinderStack);
  } else if (g_backtrace_frames > 0) {
    out.add_text("  native stack:\n");
    format_stack(out, stack.frames, shown.native_count, stack.in_signal_handler);
    format_frames_left_out(out, shown.native_libc_above, shown.native_below, has_python);
  }
  if (const SeekSite* seek = shown.seek) {
    format_seek_site_heading(out, *seek);
    out.add_text(seek_python(*seek));
    if (shown.seek_count > 0) format_stack(out, seek->frames, shown.seek_count, stack.in_signal_handler);
  }
  if (shown.opened_count > 0) {
    out.add_text("  opened at:\n");
    format_stack(out, v.description->site.frames, shown.opened_count, stack.in_signal_handler);
  } else if (shown.open_not_recorded) {
    out.add_text("  opened at:\n");
    out.add_text(kOpenNotRecorded);
  }
  if (out.full()) out.add_text("\n  (report truncated)\n");
  if (g_sink.write(out.view())) point_stderr_at_log(v, who.pid);
}

namespace {

void report_violation_briefly(const Violation& v, const ProcessIdentity& who) {
  char line[1024];  // the first line, cut if need be
  TextBuffer brief(line, sizeof line);
  format_violation(brief, v, who);
  write_reentered_line(brief.view());
}

}  // namespace

namespace {

// A line cut at its buffer's capacity (which escaped fields, cut at kMaxEscapedText, should never reach)
// still ends with a newline; in JSON it is replaced by a record that parses.
void end_line_whole(TextBuffer& out) {
  if (!out.full()) return out.end_line();
  if (g_json) {
    const size_t length = out.view().size();
    out.clear();
    out.add("{{\"type\":\"notice\",\"message\":\"a line of over {} bytes was left out\"}}\n", length);
    return;
  }
  out.end_line();
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
  end_line_whole(out);
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
    out.add_text("appendguard: ");
    add_one_line(out, message);  // a path in the message cannot start a line of its own
    out.add_text("\n");
  }
  end_line_whole(out);
  g_sink.write(out.view());
}

}  // namespace appendguard
