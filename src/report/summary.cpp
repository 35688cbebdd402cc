#include "report/summary.h"

#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report/escape.h"
#include "report/log_sink.h"
#include "report/report.h"

namespace appendguard {

constinit SummaryCounters g_summary;

SummaryValues read_summary(const SummaryCounters& c, const WriteTotals& writes) {
  auto get = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  return SummaryValues{get(c.guarded_opens), get(c.rewritten_opens), writes.writes,
                       writes.bytes,         get(c.violations),      get(c.fixed_by_enforce),
                       get(c.refused_bytes), get(c.held_sessions)};
}

void format_summary(TextBuffer& out, const SummaryValues& v, pid_t pid, const char* rank, const char* host) {
  // RANK and the host name come from outside: escaped, they cannot forge a line.
  out.add("appendguard: summary: pid={} rank=", pid);
  add_escaped_path(out, rank);
  out.add_text(" host=");
  add_escaped_path(out, host);
  out.add(
      " guarded_opens={} rewritten_opens={} writes={} bytes={} violations={} fixed_by_enforce={} "
      "refused_bytes={} held_sessions={}\n",
      v.guarded_opens, v.rewritten_opens, v.writes, v.bytes, v.violations, v.fixed_by_enforce,
      v.refused_bytes, v.held_sessions);
}

void format_summary_json(TextBuffer& out, const SummaryValues& v, pid_t pid, const char* rank,
                         const char* host) {
  out.add("{{\"type\":\"summary\",\"pid\":{},\"rank\":", pid);
  add_json_string(out, rank);
  out.add_text(",\"host\":");
  add_json_string(out, host);
  out.add(
      ",\"guarded_opens\":{},\"rewritten_opens\":{},\"writes\":{},\"bytes\":{},\"violations\":{},"
      "\"fixed_by_enforce\":{},\"refused_bytes\":{},\"held_sessions\":{}}}\n",
      v.guarded_opens, v.rewritten_opens, v.writes, v.bytes, v.violations, v.fixed_by_enforce,
      v.refused_bytes, v.held_sessions);
}

namespace {

WriteTotals (*g_write_totals)() = nullptr;

void write_summary() {
  SummaryValues v = read_summary(g_summary, g_write_totals());
  if (v.guarded_opens == 0 && v.violations == 0 && v.fixed_by_enforce == 0) return;  // touched none
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  char text[1024];
  TextBuffer out(text, sizeof text);
  pid_t pid = static_cast<pid_t>(syscall(SYS_getpid));
  if (reporting_json()) {
    format_summary_json(out, v, pid, rank_from_environment(), host);
  } else {
    format_summary(out, v, pid, rank_from_environment(), host);
  }
  out.end_line();
  report_line(out.view());
}

}  // namespace

void enable_summary_at_exit(WriteTotals (*write_totals)()) {
  g_write_totals = write_totals;
  atexit(write_summary);
}

}  // namespace appendguard
