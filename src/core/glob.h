// Glob patterns that select guarded files (APPENDGUARD_PATHS).
// A pattern without '/' matches the file name; a pattern with '/' matches the absolute, normalized path,
// where '*', '?' and '[...]' stay within one component and '**' crosses directories ("/a/**/b" also
// matches "/a/b").
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace appendguard {

// Returns an empty string when `pattern` is well formed, else why it is not.
std::string validate_glob(std::string_view pattern);

// `text` is matched whole. '/' is only matched by a literal '/' or by '**'.
bool glob_match(std::string_view pattern, std::string_view text);
// The same, adding to `steps` the pattern positions visited: at most 2 * (|pattern| + 1) * (|text| + 1),
// the bound the tests and the fuzz target check (matching never backtracks).
bool glob_match(std::string_view pattern, std::string_view text, size_t& steps);

// What a path's ending tells of the patterns (PatternSet::name_match).
enum class NameMatch : uint8_t { kNo, kMaybe, kYes };

class PatternSet {
 public:
  // Colon-separated list. Returns an empty string on success, else the reason (naming the bad pattern).
  std::string compile(std::string_view spec);

  // For each pattern with '/' whose directory before the first wildcard ("/data/lnk" in "/data/lnk/**")
  // has another physical name (`physical` fills `out` with it, symlinks resolved, and returns true), the
  // same pattern under that name is added: a file reached through the physical directory, a relative path
  // from a working directory inside it or an openat on it (getcwd and /proc/self/fd name directories
  // physically) is matched as its name through the link is. Returns how many were added.
  using PhysicalName = bool (*)(const std::string& directory, std::string& out);
  size_t add_physical_aliases(PhysicalName physical);

  bool needs_full_path() const { return has_full_path_patterns_; }
  // `full_path` may be empty when !needs_full_path().
  bool matches(std::string_view full_path, std::string_view file_name) const;
  // matches(path, file_name_of(path)), the name found only if a pattern needs it: a "*.ext" pattern is
  // told by the path's own ending (its suffix has no '/', so the path ends with it exactly when the name
  // does), which is all an open of a file matched by "*.safetensors" costs (issue 27).
  bool matches_path(std::string_view path) const {
    if (!suffixes_only_) return matches_path_slowly(path);
    for (const Pattern& p : patterns_) {
      if (ends_with_suffix(path, p)) return true;
    }
    return false;
  }
  // What the ending of `path` (as given to open, before normalization) tells: kNo when no pattern can
  // match a path ending like it (each pattern's literal suffix must end it, or, for a relative path shorter
  // than the suffix, end with "/" and the path: the rest may be the base directory's); kYes when the first
  // pattern whose suffix ends it is a "*.ext" one, so that matches_path(path) is true (the path, if it is
  // its own full path, matches: issue 27, an open's suffix compared once); else kMaybe. Rejects most paths
  // with one comparison per pattern.
  [[gnu::always_inline]] NameMatch name_match(std::string_view path) const {
    // Normalization may change how a path ends only when it ends with "/" or ".".
    if (path.empty() || path.back() == '/' || path.back() == '.') return NameMatch::kMaybe;
    for (const Pattern& p : patterns_) {
      if (__builtin_expect(path.size() < p.literal_suffix.size(), 0)) {
        if (p.slash_in_suffix && path[0] != '/' && suffix_ends_with_relative(p, path))
          return NameMatch::kMaybe;
      } else if (ends_with_suffix(path, p)) {
        return p.star_then_suffix ? NameMatch::kYes : NameMatch::kMaybe;
      }
    }
    return NameMatch::kNo;
  }
  // False when no pattern can match a path ending like `path` (name_match's kNo).
  bool could_match(std::string_view path) const { return name_match(path) != NameMatch::kNo; }
  size_t size() const { return patterns_.size(); }

 private:
  struct Pattern {
    std::string text;
    std::string literal_suffix;  // what a match must end with ("*.safetensors" -> ".safetensors")
    // Its last 8 bytes (or fewer) as one little-endian word, at the high end, and their mask: most names
    // are told apart from the suffix by one load and one comparison (issue 27).
    uint64_t end_word = 0;
    uint64_t end_mask = 0;
    // A suffix of 9 to 16 bytes: its first 8, compared as a second word (".safetensors" is 12), not by
    // memcmp.
    uint64_t start_word = 0;
    bool full_path = false;
    bool star_then_suffix = false;  // "*" and its literal suffix only: matched by the suffix test alone
    bool slash_in_suffix = false;   // only such a suffix may end a relative path shorter than it
  };
  std::vector<Pattern> patterns_;
  bool has_full_path_patterns_ = false;
  bool suffixes_only_ = false;  // every pattern is star_then_suffix: matches_path is the suffix tests
  bool matches_path_slowly(std::string_view path) const;
  static Pattern make_pattern(std::string text, bool full_path);
  static bool ends_with_suffix(std::string_view text, const Pattern& p) {
    const size_t n = p.literal_suffix.size();
    if (text.size() < n) return false;
    if (text.size() < 8) return ends_with_long_suffix(text, p);
    uint64_t last;  // the text's last 8 bytes, little-endian
    std::memcpy(&last, text.data() + text.size() - 8, 8);
    if ((last & p.end_mask) != p.end_word) return false;
    if (n <= 8) return true;
    if (n > 16) return ends_with_long_suffix(text, p);
    uint64_t first;  // the text's bytes where the suffix starts (n <= text.size())
    std::memcpy(&first, text.data() + text.size() - n, 8);
    return first == p.start_word;
  }
  static bool ends_with_long_suffix(std::string_view text, const Pattern& p);
  // Whether `p`'s literal suffix ends with "/" and the relative `path` (shorter than it): joined to a
  // base directory, the path may then end with the suffix ("x.bin" against "/data/**/x.bin").
  static bool suffix_ends_with_relative(const Pattern& p, std::string_view path);
};

std::string_view file_name_of(std::string_view path);

}  // namespace appendguard
