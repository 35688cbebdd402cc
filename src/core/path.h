// Lexical path normalization into a caller-provided buffer (no allocation, usable inside hooks).
#pragma once

#include <cstddef>
#include <string_view>

#include "core/cpu_features.h"

namespace appendguard {

// Joins `path` onto `base_dir` when `path` is relative, then removes "//", "." and ".." lexically
// (symlinks are not resolved). Writes a NUL-terminated absolute path to `out`. Returns its length, or 0
// when it does not fit in `capacity` or when a relative path comes without an absolute base.
size_t normalize_path(std::string_view base_dir, std::string_view path, char* out, size_t capacity);

// A path that normalize_path would leave as it is, without copying it (issue 27: a write open of an
// unmatched name decides "on no append-only mount" without making its path): an absolute `path` (`head`,
// `tail` empty), or a relative one against an absolute `base` (the path is `head` + "/" + `tail`, or "/" +
// `tail` when `head` is "/").
struct SplitPath {
  std::string_view head;
  std::string_view tail;
};

// Whether some '/' of p[0..n) is followed by '/' or '.' (the only ways a path that does not end with '/'
// can be changed by normalization; ".hidden" is one too, conservatively). Never reads outside p[0..n).
bool has_slash_before_slash_or_dot(const char* p, size_t n);

// Whether `s` is absolute and surely left as it is by normalize_path: "/", or no '/' followed by '/' or
// '.' and no trailing '/' (conservative: "/a/.hidden" is normal but said not to be).
inline bool plainly_normal_absolute(std::string_view s) {
  if (s.empty() || s[0] != '/') return false;
  return s.size() == 1 || (s.back() != '/' && !has_slash_before_slash_or_dot(s.data(), s.size()));
}

// Whether `s` is relative and surely names something under the base it is joined to, as normalize_path
// joins it to a normal base: not empty, not starting with '.' or '/', no '/' followed by '/' or '.' and no
// trailing '/' (no empty, "." or ".." component; conservative: "a/.hidden" is said not to be). Short paths,
// nearly all, are scanned here: has_slash_before_slash_or_dot pads them into a buffer first.
inline bool plainly_normal_relative(std::string_view s) {
  if (s.empty() || s[0] == '.' || s[0] == '/' || s.back() == '/') return false;
  if (s.size() > 32) return !has_slash_before_slash_or_dot(s.data(), s.size());
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] == '/' && (s[i + 1] == '/' || s[i + 1] == '.')) return false;
  }
  return true;
}

// plainly_normal_absolute(path) and, when true, `path` and a NUL copied into out[0..path.size()]: the test
// and the copy in one pass over the bytes (issue 27: a guarded open's path is its own full path). `out`
// (at least path.size() + 1 bytes) may be written to either way.
bool copy_plainly_normal_absolute_short(std::string_view path, char* out);
#if defined(__x86_64__)
bool copy_plainly_normal_avx2(const char* p, size_t n, char* out);  // n >= 33, '/' first, AVX2 present
#endif
inline bool copy_plainly_normal_absolute(std::string_view path, char* out) {
#if defined(__x86_64__)
  // The common case chosen inline (a path of 33 bytes and more on a processor with AVX2).
  if (path.size() >= 33 && path[0] == '/' && cpu_has_avx2())
    return copy_plainly_normal_avx2(path.data(), path.size(), out);
#endif
  return copy_plainly_normal_absolute_short(path, out);
}

// Fills `out` and returns true when normalize_path(base, path) is exactly the split path; false when it
// may differ (an empty, "." or ".." component, a trailing '/', a component starting with '.': then call
// normalize_path) or when a relative path comes without an absolute base. Reads each byte once, 16 at a
// time.
inline bool split_normal_path(std::string_view base, std::string_view path, SplitPath& out) {
  if (path.empty()) return false;
  if (path[0] == '/') {
    if (!plainly_normal_absolute(path)) return false;
    out = {path, {}};
    return true;
  }
  if (!plainly_normal_relative(path) || !plainly_normal_absolute(base)) return false;
  out = {base, path};
  return true;
}

// normalize_path(base, path) when it is the base, "/" and the path (split_normal_path's test: a relative
// path without an empty, "." or ".." component or a trailing '/', against a plainly normal absolute base),
// made in place: out[0..base_length) holds the base (a working directory's name, read into `out`), the
// rest and a NUL are appended. Returns the joined length; 0 when normalize_path might make another path,
// or when it does not fit in `capacity` (`out` may then have been written to).
size_t join_plainly_normal(char* out, size_t base_length, std::string_view path, size_t capacity);

// Whether `prefix` (absolute and normal, as a mount point) is `path` or one of its directories, as
// mount lookups test it on the joined path.
inline bool split_path_under(const SplitPath& path, std::string_view prefix) {
  auto is_path_prefix = [](std::string_view p, std::string_view of) {
    return of.starts_with(p) && (of.size() == p.size() || of[p.size()] == '/');
  };
  if (prefix.size() == 1) return prefix[0] == '/';
  if (path.tail.empty()) return is_path_prefix(prefix, path.head);
  // The path is h + "/" + tail.
  const std::string_view h = path.head.size() == 1 ? std::string_view{} : path.head;
  if (prefix.size() <= h.size()) return is_path_prefix(prefix, h);
  if (!prefix.starts_with(h) || prefix[h.size()] != '/') return false;
  return is_path_prefix(prefix.substr(h.size() + 1), path.tail);
}

// The joined path's character at `i` (the first bytes: mount points and /proc names are told apart by
// them without a comparison), or '\0' past its end.
inline char split_path_at(const SplitPath& path, size_t i) {
  if (path.tail.empty() || (path.head.size() > 1 && i < path.head.size()))
    return i < path.head.size() ? path.head[i] : '\0';
  const size_t h = path.head.size() == 1 ? 0 : path.head.size();  // then '/' at h, the tail after it
  if (i == h) return '/';
  return i - h - 1 < path.tail.size() ? path.tail[i - h - 1] : '\0';
}

}  // namespace appendguard
