// `appendguard report LOG...`: violations in report logs (text or APPENDGUARD_FORMAT=json lines), grouped by
// call site across ranks (one bug in 64 ranks is one group), else by operation and file when a report has no
// stack. Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace appendguard {

struct ViolationGroup {
  std::string operation;
  std::string path;        // the real path
  std::string shown_path;  // as the report wrote it (escaped: safe to print)
  size_t count = 0;
  std::string first_line;  // the first report's first line
  std::string why;         // its "why:" line
  // Audit findings that enforce mode fixes by itself ("; fixed by enforce mode" on the first line): not
  // counted as violations by `appendguard report`.
  bool fixed_by_enforce = false;
  std::vector<std::string> ranks;  // distinct, in order of appearance ("; pid P rank R host H")
  // The innermost Python frame ('File "x.py", line 8, in save'), else the first native frame outside
  // libc and the library ("save_header+0x1c (app+0x1234)"); "" when the report has no stack.
  std::string site;
  // A write at the position, not at the end: where the program moved the position off the end (the
  // report's "the position left the end at:" block), its call ("lseek64(offset 0, SEEK_SET) -> 0, end of
  // file 108") and its site, chosen as `site` is; "" when the report has none. Part of the group's key.
  std::string seek_call;
  std::string seek_site;
  size_t files = 0;       // distinct files in the group
  std::string first_log;  // the log of the first report
  std::unordered_set<std::string> paths_seen;
  std::unordered_set<std::string> ranks_seen;
};

// A field read from a log is kept up to this many bytes; a longer one is cut and ends with "...[+N]"
// (N: the bytes left out), as the library cuts its own fields (report/escape.h).
constexpr size_t kMaxFieldBytes = 8192 + 64;
// No record the library writes is longer (its line buffers are smaller): a longer one is not read.
constexpr size_t kMaxRecordLine = size_t{1} << 20;
std::string bounded_field(std::string_view text);

// A line that starts as a record does (a report's first line, a JSON line `{"type"...`) but does not
// read as one: a log cut short or forged. `appendguard report` stops on it, never counts it as nothing.
struct BadRecord {
  size_t line = 0;  // 1-based
  std::string what;
};

// One report, from either format (the numbers as written: "" when the report has none).
struct ViolationReport {
  std::string operation;
  std::string path;
  std::string shown_path;
  std::string first_line;
  bool fixed_by_enforce = false;
  std::string site;
  std::string seek_call;  // see ViolationGroup::seek_call
  std::string seek_site;
  std::string why;
  std::string rank;
  std::string pid;
  std::string offset;
  std::string bytes;
  std::string end_of_file;
  std::string outcome;  // refused, aborted, let_through, audit, kernel_refuses
  size_t at = 0;        // where its first line starts in the log
};

// Reads the escaped path at the start of `text` (src/report/escape.h): quoted up to the closing quote, or
// up to the first space. Returns the characters consumed, or 0 if malformed.
size_t read_escaped_path(std::string_view text, std::string& path);

// The call site of a report block (its lines after the first): see ViolationGroup::site.
std::string call_site_of(std::string_view block);

// The seek site of a report block: the call and the site of its "the position left the end at:" lines
// (see ViolationGroup::seek_call and seek_site); both "" when the block has none.
struct SeekSiteText {
  std::string call;
  std::string site;
};
SeekSiteText seek_site_of(std::string_view block);

// Adds the violations found in `log` (any text; lines that are not records are ignored) to `groups`,
// keeping the order in which groups first appear; and each report to `reports`, when given. Returns the
// first line that starts as a record but does not read as one (the rest of the log is still read).
std::optional<BadRecord> collect_violations(std::string_view log, std::vector<ViolationGroup>& groups,
                                            std::string_view log_name = "",
                                            std::vector<ViolationReport>* reports = nullptr);

// Whether a log line starts as one of the library's JSON records (`{"type"`), which must parse.
bool starts_as_json_record(std::string_view line);

}  // namespace appendguard
