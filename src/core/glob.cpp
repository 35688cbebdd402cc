#include "core/glob.h"

namespace appendguard {
namespace {

// Parses a bracket expression starting at pattern[0] == '['. On success sets `length` to the number of
// pattern characters it spans and `matched` to whether `c` is in the set.
bool match_bracket(std::string_view pattern, char c, size_t& length, bool& matched) {
  size_t i = 1;
  bool negate = i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^');
  if (negate) ++i;
  bool found = false;
  bool first = true;
  while (i < pattern.size() && (first || pattern[i] != ']')) {
    first = false;
    char lo = pattern[i];
    if (lo == '\\' && i + 1 < pattern.size()) lo = pattern[++i];
    char hi = lo;
    if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
      hi = pattern[i + 2];
      if (hi == '\\' && i + 3 < pattern.size()) {
        hi = pattern[i + 3];
        ++i;
      }
      i += 2;
    }
    if (lo <= c && c <= hi) found = true;
    ++i;
  }
  if (i >= pattern.size()) return false;  // no closing ']'
  length = i + 1;
  matched = (found != negate) && c != '/';
  return true;
}

bool match_from(std::string_view p, std::string_view t) {
  while (!p.empty()) {
    char pc = p[0];
    if (pc == '*') {
      bool crosses = p.size() >= 2 && p[1] == '*';
      std::string_view rest = p.substr(crosses ? 2 : 1);
      if (crosses && !rest.empty() && rest[0] == '/') {
        // "**/" also matches zero directories.
        if (match_from(rest.substr(1), t)) return true;
      }
      for (size_t i = 0; i <= t.size(); ++i) {
        if (match_from(rest, t.substr(i))) return true;
        if (i < t.size() && t[i] == '/' && !crosses) return false;
      }
      return false;
    }
    if (t.empty()) return false;
    if (pc == '?') {
      if (t[0] == '/') return false;
    } else if (pc == '[') {
      size_t length = 0;
      bool matched = false;
      if (!match_bracket(p, t[0], length, matched)) return false;
      if (!matched) return false;
      p.remove_prefix(length);
      t.remove_prefix(1);
      continue;
    } else {
      if (pc == '\\' && p.size() > 1) {
        p.remove_prefix(1);
        pc = p[0];
      }
      if (pc != t[0]) return false;
    }
    p.remove_prefix(1);
    t.remove_prefix(1);
  }
  return t.empty();
}

}  // namespace

std::string_view file_name_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string validate_glob(std::string_view pattern) {
  if (pattern.empty()) return "empty pattern (two ':' in a row, or a ':' at either end)";
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\') {
      if (i + 1 == pattern.size()) return "pattern '" + std::string(pattern) + "' ends with a lone '\\'";
      ++i;
    } else if (pattern[i] == '[') {
      size_t length = 0;
      bool matched = false;
      if (!match_bracket(pattern.substr(i), 'a', length, matched)) {
        return "pattern '" + std::string(pattern) + "' has a '[' without a closing ']'";
      }
      i += length - 1;
    }
  }
  bool has_slash = pattern.find('/') != std::string_view::npos;
  if (has_slash && pattern[0] != '/' && pattern.substr(0, 2) != "**") {
    return "pattern '" + std::string(pattern) +
           "' contains '/' but is not absolute; patterns with '/' match the absolute path: start it with '/' "
           "or '**/'";
  }
  return {};
}

bool glob_match(std::string_view pattern, std::string_view text) {
  return match_from(pattern, text);
}

namespace {

// The literal characters after the last wildcard or bracket ("*.safetensors" -> ".safetensors").
std::string literal_suffix(std::string_view pattern) {
  size_t start = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') start = i + 1;
    if (c == '\\') ++i;  // an escaped character is literal but its backslash is not
  }
  return std::string(pattern.substr(start < pattern.size() ? start : pattern.size()));
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

std::string PatternSet::compile(std::string_view spec) {
  patterns_.clear();
  has_full_path_patterns_ = false;
  if (spec.empty()) return "no pattern given";
  size_t start = 0;
  while (true) {
    size_t colon = spec.find(':', start);
    std::string_view pattern =
        spec.substr(start, colon == std::string_view::npos ? spec.npos : colon - start);
    std::string error = validate_glob(pattern);
    if (!error.empty()) return error;
    bool full = pattern.find('/') != std::string_view::npos;
    patterns_.push_back(Pattern{std::string(pattern), literal_suffix(pattern), full});
    has_full_path_patterns_ |= full;
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  return {};
}

bool PatternSet::matches(std::string_view full_path, std::string_view file_name) const {
  for (const Pattern& p : patterns_) {
    std::string_view text = p.full_path ? full_path : file_name;
    if (ends_with(text, p.literal_suffix) && match_from(p.text, text)) return true;
  }
  return false;
}

bool PatternSet::could_match(std::string_view path) const {
  // Normalization may change how a path ends only when it ends with "/" or ".".
  if (path.empty() || path.back() == '/' || path.back() == '.') return true;
  for (const Pattern& p : patterns_) {
    if (ends_with(path, p.literal_suffix)) return true;
  }
  return false;
}

}  // namespace appendguard
