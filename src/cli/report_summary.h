// `appendguard report LOG...`: violations in report logs (text or APPENDGUARD_FORMAT=json lines), grouped by
// call site across ranks (one bug in 64 ranks is one group), else by operation and file when a report has no
// stack. Pure.
#pragma once

#include <string>
#include <string_view>
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
  std::vector<std::string> paths_seen;
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

// Adds the violations found in `log` (any text; non-report lines are ignored) to `groups`, keeping the
// order in which groups first appear; and each report to `reports`, when given.
void collect_violations(std::string_view log, std::vector<ViolationGroup>& groups,
                        std::string_view log_name = "", std::vector<ViolationReport>* reports = nullptr);

}  // namespace appendguard
