// `appendguard report LOG...`: violations in report logs, grouped by operation and file. Pure.
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
};

// Adds the violations found in `log` (any text; non-report lines are ignored) to `groups`, keeping the
// order in which groups first appear.
void collect_violations(std::string_view log, std::vector<ViolationGroup>& groups);

}  // namespace appendguard
