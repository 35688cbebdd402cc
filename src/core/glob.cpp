#include "core/glob.h"

#include <cstring>
#include <vector>

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

// What the pattern element at pattern[i] is, and how many pattern characters it spans.
enum class Element { literal, any_char, bracket, star, star_star };

Element element_at(std::string_view p, size_t i, size_t& length) {
  char c = p[i];
  if (c == '*') {
    bool crosses = i + 1 < p.size() && p[i + 1] == '*';
    length = crosses ? 2 : 1;
    return crosses ? Element::star_star : Element::star;
  }
  length = 1;
  if (c == '?') return Element::any_char;
  if (c == '[') return Element::bracket;
  if (c == '\\' && i + 1 < p.size()) length = 2;
  return Element::literal;
}

// Each pattern position holds two states: kAt (about to match the element starting there) and, for a
// "**/" element only, kInside (its "**" has consumed at least one character, so a '/' must follow; the
// zero-directory skip past "**/" is taken only from kAt).
constexpr unsigned char kAt = 1;
constexpr unsigned char kInside = 2;

bool starts_zero_directory_element(std::string_view p, size_t i) {
  return i + 2 < p.size() && p[i] == '*' && p[i + 1] == '*' && p[i + 2] == '/';
}

// Adds the states reachable from the active ones without consuming text: a star (one or two) matches the
// empty string, "**/" also matches zero directories, and a "**" that consumed something reaches its '/'.
// These moves only go forward, so one pass in increasing order is a closure.
void close_over_empty(std::string_view p, unsigned char* active, size_t& steps) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (!active[i]) continue;
    ++steps;
    size_t length = 0;
    Element e = element_at(p, i, length);
    bool zero_directory = e == Element::star_star && starts_zero_directory_element(p, i);
    if (active[i] & kInside) active[i + 2] |= kAt;  // on to the '/'
    if (!(active[i] & kAt)) continue;
    if (e == Element::star || e == Element::star_star) active[i + length] |= kAt;
    if (zero_directory) active[i + 3] |= kAt;
  }
}

// Simulates the pattern as a nondeterministic automaton over pattern positions: one pass over the text,
// each character moving every active state at most once. Time O(|p| * |t|) (bracket parsing adds its
// length), no backtracking, whatever the stars; `steps` counts position visits.
bool match_positions(std::string_view p, std::string_view t, unsigned char* active, unsigned char* next,
                     size_t& steps) {
  const size_t n = p.size() + 1;
  for (size_t i = 0; i < n; ++i) active[i] = 0;
  active[0] = kAt;
  close_over_empty(p, active, steps);
  for (char c : t) {
    bool any = false;
    for (size_t i = 0; i < n; ++i) next[i] = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      if (!active[i]) continue;
      ++steps;
      size_t length = 0;
      Element e = element_at(p, i, length);
      if (e == Element::star_star && starts_zero_directory_element(p, i)) {
        next[i] |= kInside;  // from either state: "**" consumes anything, then needs its '/'
        any = true;
        continue;
      }
      if (!(active[i] & kAt)) continue;
      switch (e) {
        case Element::star:
          if (c != '/') {
            next[i] |= kAt;
            any = true;
          }
          break;
        case Element::star_star:
          next[i] |= kAt;
          any = true;
          break;
        case Element::any_char:
          if (c != '/') {
            next[i + 1] |= kAt;
            any = true;
          }
          break;
        case Element::bracket: {
          bool matched = false;
          if (match_bracket(p.substr(i), c, length, matched) && matched) {
            next[i + length] |= kAt;
            any = true;
          }
          break;
        }
        case Element::literal:
          if (p[i + length - 1] == c) {
            next[i + length] |= kAt;
            any = true;
          }
          break;
      }
    }
    if (!any) return false;
    close_over_empty(p, next, steps);
    unsigned char* swap = active;
    active = next;
    next = swap;
  }
  return (active[p.size()] & kAt) != 0;
}

bool match_from(std::string_view p, std::string_view t, size_t& steps) {
  // Two rows of |p| + 1 flags; on the stack for the patterns people write.
  constexpr size_t kStackPositions = 256;
  if (p.size() < kStackPositions) {
    unsigned char active[kStackPositions];
    unsigned char next[kStackPositions];
    return match_positions(p, t, active, next, steps);
  }
  std::vector<unsigned char> rows(2 * (p.size() + 1));
  return match_positions(p, t, rows.data(), rows.data() + p.size() + 1, steps);
}

}  // namespace

std::string_view file_name_of(std::string_view path) {
  // memrchr: a guarded open asks for its name (issue 27), which rfind walked byte by byte.
  const void* slash = path.empty() ? nullptr : memrchr(path.data(), '/', path.size());
  if (!slash) return path;
  return path.substr(static_cast<size_t>(static_cast<const char*>(slash) - path.data()) + 1);
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
  size_t steps = 0;
  return match_from(pattern, text, steps);
}

bool glob_match(std::string_view pattern, std::string_view text, size_t& steps) {
  return match_from(pattern, text, steps);
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

}  // namespace

PatternSet::Pattern PatternSet::make_pattern(std::string text, bool full_path) {
  Pattern p;
  p.text = std::move(text);
  p.full_path = full_path;
  p.literal_suffix = literal_suffix(p.text);
  const size_t n = p.literal_suffix.size() < 8 ? p.literal_suffix.size() : 8;
  for (size_t i = 0; i < n; ++i) {  // byte 8 - n + i of the word (little-endian: its high bytes)
    const auto byte = static_cast<unsigned char>(p.literal_suffix[p.literal_suffix.size() - n + i]);
    p.end_word |= uint64_t{byte} << (8 * (8 - n + i));
  }
  p.end_mask = n == 0 ? 0 : ~uint64_t{0} << (8 * (8 - n));
  if (p.literal_suffix.size() > 8) std::memcpy(&p.start_word, p.literal_suffix.data(), 8);
  p.slash_in_suffix = p.literal_suffix.find('/') != std::string::npos;
  return p;
}

bool PatternSet::ends_with_long_suffix(std::string_view text, const Pattern& p) {
  const std::string_view suffix = p.literal_suffix;
  if (text.size() >= 8) {
    uint64_t last;
    std::memcpy(&last, text.data() + text.size() - 8, 8);
    if ((last & p.end_mask) != p.end_word) return false;
  }
  // An empty suffix matches: memcmp may not be given an empty text's null pointer, even for 0 bytes.
  return suffix.empty() ||
         std::memcmp(text.data() + text.size() - suffix.size(), suffix.data(), suffix.size()) == 0;
}

bool PatternSet::suffix_ends_with_relative(const Pattern& p, std::string_view path) {
  const std::string_view suffix = p.literal_suffix;
  return suffix.size() > path.size() && suffix[suffix.size() - path.size() - 1] == '/' &&
         suffix.ends_with(path);
}

std::string PatternSet::compile(std::string_view spec) {
  patterns_.clear();
  has_full_path_patterns_ = false;
  suffixes_only_ = false;
  if (spec.empty()) return "no pattern given";
  size_t start = 0;
  while (true) {
    size_t colon = spec.find(':', start);
    std::string_view pattern =
        spec.substr(start, colon == std::string_view::npos ? spec.npos : colon - start);
    std::string error = validate_glob(pattern);
    if (!error.empty()) return error;
    bool full = pattern.find('/') != std::string_view::npos;
    patterns_.push_back(make_pattern(std::string(pattern), full));
    Pattern& added = patterns_.back();
    added.star_then_suffix = pattern.size() == added.literal_suffix.size() + 1 && pattern[0] == '*' &&
                             added.literal_suffix.find('/') == std::string::npos;
    has_full_path_patterns_ |= full;
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  suffixes_only_ = true;
  for (const Pattern& p : patterns_) suffixes_only_ = suffixes_only_ && p.star_then_suffix;
  return {};
}

size_t PatternSet::add_physical_aliases(PhysicalName physical) {
  size_t added = 0;
  const size_t count = patterns_.size();
  for (size_t i = 0; i < count; ++i) {
    const std::string text = patterns_[i].text;
    if (!patterns_[i].full_path || text[0] != '/') continue;
    size_t wildcard = text.find_first_of("*?[\\");
    size_t slash = text.rfind('/', wildcard == std::string::npos ? std::string::npos : wildcard);
    if (slash == std::string::npos || slash == 0) continue;
    std::string resolved;
    if (!physical(text.substr(0, slash), resolved) || resolved.empty() || resolved[0] != '/') continue;
    if (resolved == text.substr(0, slash)) continue;
    std::string alias = (resolved == "/" ? "" : resolved) + text.substr(slash);
    if (!validate_glob(alias).empty()) continue;
    bool known = false;
    for (const Pattern& p : patterns_) known = known || p.text == alias;
    if (known) continue;
    patterns_.push_back(make_pattern(alias, true));
    suffixes_only_ = false;
    ++added;
  }
  return added;
}

bool PatternSet::matches(std::string_view full_path, std::string_view file_name) const {
  for (const Pattern& p : patterns_) {
    std::string_view text = p.full_path ? full_path : file_name;
    if (!ends_with_suffix(text, p)) continue;
    if (p.star_then_suffix) {  // "*.ext": compiled once into a suffix test ('*' does not cross '/')
      if (text.substr(0, text.size() - p.literal_suffix.size()).find('/') == std::string_view::npos)
        return true;
      continue;
    }
    if (glob_match(p.text, text)) return true;
  }
  return false;
}

bool PatternSet::matches_path_slowly(std::string_view path) const {
  std::string_view name;
  bool named = false;
  for (const Pattern& p : patterns_) {
    // "*.ext": the name ends with the suffix exactly when the path does (the suffix holds no '/').
    if (p.star_then_suffix) {
      if (ends_with_suffix(path, p)) return true;
      continue;
    }
    if (!p.full_path && !named) {
      name = file_name_of(path);
      named = true;
    }
    const std::string_view text = p.full_path ? path : name;
    if (ends_with_suffix(text, p) && glob_match(p.text, text)) return true;
  }
  return false;
}

}  // namespace appendguard
