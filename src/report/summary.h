// The line a process writes at exit when it touched guarded files (APPENDGUARD_SUMMARY, on by default):
// what the library did for it. Counters are relaxed atomics bumped on the guarded paths only; the
// untracked path never touches them. Writes and their bytes are counted per file by the file table
// (TrackedFile::count_write), under the file's lock: the summary asks for their totals at exit.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include "core/file_table.h"
#include "core/hidden.h"
#include "report/text_buffer.h"

namespace appendguard {

struct SummaryCounters {
  std::atomic<uint64_t> guarded_opens{0};     // opens (and adoptions) of guarded files that were tracked
  std::atomic<uint64_t> rewritten_opens{0};   // opens whose flags enforce mode changed
  std::atomic<uint64_t> violations{0};        // reports of a broken rule (audit: those that need code)
  std::atomic<uint64_t> fixed_by_enforce{0};  // audit findings enforce mode fixes (not in violations)
  std::atomic<uint64_t> refused_bytes{0};     // bytes of refused writes
  std::atomic<uint64_t> held_sessions{0};     // closes of a guarded file held open for its next write open
};

extern APPENDGUARD_HIDDEN constinit SummaryCounters g_summary;

inline void count_event(std::atomic<uint64_t>& counter, uint64_t n = 1) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

struct SummaryValues {
  uint64_t guarded_opens, rewritten_opens, writes, bytes, violations, fixed_by_enforce, refused_bytes,
      held_sessions;
};
// `writes`: the write-family calls on guarded descriptors that wrote bytes, and those bytes.
SummaryValues read_summary(const SummaryCounters& counters, const WriteTotals& writes);

// "appendguard: summary: pid=P rank=R host=H guarded_opens=... held_sessions=N\n" (pure; unit-tested).
void format_summary(TextBuffer& out, const SummaryValues& values, pid_t pid, const char* rank,
                    const char* host);

// The same as a JSON object: {"type":"summary","pid":P,"rank":"R","host":"H","guarded_opens":N,...}.
void format_summary_json(TextBuffer& out, const SummaryValues& values, pid_t pid, const char* rank,
                         const char* host);

// At exit: the line to the log when this process touched guarded files and the summary is on, with the
// write totals `write_totals` gives then.
void enable_summary_at_exit(WriteTotals (*write_totals)());

}  // namespace appendguard
