// The operations on each guarded file, read back from logs (trace lines, violation reports and summary
// lines, text or JSON, any mix) for `appendguard report --html`. Pure.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cli/report_summary.h"

namespace appendguard {

enum class EventKind {
  kWrite,     // a write-family call that wrote (or was let through)
  kRefused,   // a refused write-family call (its trace line, or its report alone)
  kSeek,      // lseek, stdio_seek
  kOpen,      // a write open (flags asked, flags used, size)
  kTruncate,  // a truncation or preallocation that was sent (or refused)
  kDeferred,  // a growing ftruncate / fallocate recorded, not sent
  kFill,      // the zero fill of a deferred preallocation at close
  kCommit,    // a held session committed
  kHeld,      // a close that kept the session open
  kClose,
  kOther,
};

struct FileEvent {
  EventKind kind = EventKind::kOther;
  std::string operation;
  std::string pid;
  std::string tid;
  int fd = -1;
  double time = -1;  // seconds since the epoch; -1: none in the log
  size_t order = 0;  // position across all logs (log index, then place in the log)
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t end_of_file = 0;  // after the operation; for a seek, the end it saw
  bool has_end = false;
  std::string detail;  // the trace line's detail, as written
  std::string result;  // "4000", "-1 EOPNOTSUPP"
  long report = -1;    // its violation report (an index in Timelines::reports), when one was matched
  size_t merged = 1;   // adjacent appends drawn as one (report_html)
};

struct Writer {
  std::string pid;
  std::string rank;  // from the summary line or a report of the pid; "" unknown
  std::string host;
  size_t writes = 0;
  uint64_t bytes = 0;
};

struct FileTimeline {
  std::string path;
  std::vector<FileEvent> events;  // in time order (log order when the log has no times)
  std::vector<Writer> writers;    // per pid, in order of first write (rank and host filled by finish)
  size_t writes = 0;
  uint64_t bytes = 0;
  size_t refusals = 0;
  bool timed = false;  // every event has a time
};

struct Timelines {
  std::vector<FileTimeline> files;          // in order of first appearance
  std::map<std::string, Writer> processes;  // by pid: rank and host (summary lines, reports)
  std::vector<ViolationReport> reports;
  std::vector<ViolationGroup> groups;   // as `appendguard report` groups them
  size_t read_only_files = 0;           // files seen only in read-only opens: not drawn
  std::map<std::string, size_t> index;  // files[index[path]], while the logs are read
};

// Adds one log's lines (log_index: its place among the logs given) to `out`. Returns the first line that
// starts as a record but does not read as one (collect_violations).
std::optional<BadRecord> add_log(std::string_view log, std::string_view log_name, size_t log_index,
                                 Timelines& out);
// Once every log is in: sorts each file's events by time, matches refused writes with their reports,
// counts writers, drops files that were only read.
void finish(Timelines& out);

const char* kind_name(EventKind kind);

}  // namespace appendguard
