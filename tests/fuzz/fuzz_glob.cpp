// validate_glob and glob_match on PATTERN\nTEXT: matching stays within its step bound (no exponential
// backtracking, issue 13) and agrees with the old recursive matcher whenever that one finishes within a
// budget (a differential check of the automaton).
#include <string>

#include "core/glob.h"
#include "fuzz_support.h"

namespace {

// The recursive matcher glob_match replaced (exponential in the stars), with a budget: returns -1 when
// the budget runs out, else 0 or 1.
int reference_match(std::string_view p, std::string_view t, long& budget);

int reference_bracket(std::string_view p, char c, size_t& length) {
  size_t i = 1;
  bool negate = i < p.size() && (p[i] == '!' || p[i] == '^');
  if (negate) ++i;
  bool found = false;
  bool first = true;
  while (i < p.size() && (first || p[i] != ']')) {
    first = false;
    char lo = p[i];
    if (lo == '\\' && i + 1 < p.size()) lo = p[++i];
    char hi = lo;
    if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
      hi = p[i + 2];
      if (hi == '\\' && i + 3 < p.size()) {
        hi = p[i + 3];
        ++i;
      }
      i += 2;
    }
    if (lo <= c && c <= hi) found = true;
    ++i;
  }
  if (i >= p.size()) return -1;
  length = i + 1;
  return (found != negate) && c != '/';
}

int reference_match(std::string_view p, std::string_view t, long& budget) {
  while (!p.empty()) {
    if (--budget < 0) return -1;
    char pc = p[0];
    if (pc == '*') {
      bool crosses = p.size() >= 2 && p[1] == '*';
      std::string_view rest = p.substr(crosses ? 2 : 1);
      if (crosses && !rest.empty() && rest[0] == '/') {
        int r = reference_match(rest.substr(1), t, budget);
        if (r != 0) return r;
      }
      for (size_t i = 0; i <= t.size(); ++i) {
        int r = reference_match(rest, t.substr(i), budget);
        if (r != 0) return r;
        if (i < t.size() && t[i] == '/' && !crosses) return 0;
      }
      return 0;
    }
    if (t.empty()) return 0;
    if (pc == '?') {
      if (t[0] == '/') return 0;
    } else if (pc == '[') {
      size_t length = 0;
      if (reference_bracket(p, t[0], length) != 1) return 0;
      p.remove_prefix(length);
      t.remove_prefix(1);
      continue;
    } else {
      if (pc == '\\' && p.size() > 1) {
        p.remove_prefix(1);
        pc = p[0];
      }
      if (pc != t[0]) return 0;
    }
    p.remove_prefix(1);
    t.remove_prefix(1);
  }
  return t.empty() ? 1 : 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input = fuzz::as_text(data, size);
  size_t newline = input.find('\n');
  std::string_view pattern = input.substr(0, newline);
  std::string_view text = newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);
  std::string why = appendguard::validate_glob(pattern);
  FUZZ_CHECK(why.find('\n') == std::string::npos || pattern.find('\n') != std::string_view::npos);
  size_t steps = 0;
  bool matched = appendguard::glob_match(pattern, text, steps);
  FUZZ_CHECK(steps <= 2 * (pattern.size() + 1) * (text.size() + 1));
  long budget = 20000;
  int expected = reference_match(pattern, text, budget);
  if (expected >= 0) FUZZ_CHECK(matched == (expected == 1));
  if (why.empty()) {
    appendguard::PatternSet set;
    FUZZ_CHECK(set.compile(pattern).empty() || pattern.find(':') != std::string_view::npos);
    // A guarded open's match (issue 27): matches_path is matches on the path and its name, and a path
    // a pattern matches is never rejected by could_match, nor any relative tail of it (a name given
    // relative to its directory).
    const bool by_path = set.matches_path(text);
    FUZZ_CHECK(by_path == set.matches(text, appendguard::file_name_of(text)));
    // name_match's kYes spares a guarded open the path's comparison: it must be a match.
    if (set.name_match(text) == appendguard::NameMatch::kYes) FUZZ_CHECK(by_path);
    if (by_path && !text.empty() && text[0] == '/' && text.find("//") == std::string_view::npos &&
        text.find("/.") == std::string_view::npos) {
      FUZZ_CHECK(set.could_match(text));
      for (size_t slash = text.find('/'); slash != std::string_view::npos;
           slash = text.find('/', slash + 1)) {
        if (slash + 1 < text.size()) FUZZ_CHECK(set.could_match(text.substr(slash + 1)));
      }
    }
  }
  return 0;
}
