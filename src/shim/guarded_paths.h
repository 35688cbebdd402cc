// Which paths are guarded: by name (APPENDGUARD_PATHS) or by being on an append-only mount, and the
// absolute, normalized paths the decision is made on.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/glob.h"
#include "core/path.h"
#include "shim/runtime.h"

namespace appendguard {

// `path` made absolute against `dirfd` (AT_FDCWD: the working directory) and normalized, into `out`
// (kMaxPath bytes).
bool resolve_full_path(int dirfd, const char* path, char* out);
// The path the kernel has for `fd` (readlink of /proc/self/fd/N), NUL-terminated.
bool descriptor_path(int fd, char* out, size_t capacity);

// APPENDGUARD_PATHS: fills `full_path` (absolute and normalized where it can be resolved) when it matches.
// A pattern with '/' matches the path as given (made absolute) or the same path with the symlinks of its
// directory resolved, so that a file is guarded however it is named (absolute, relative, openat).
// `length`: strlen(path), when the caller has it. Most names are told by the patterns' literal suffixes
// here, inline; a name ending like a pattern, or with a digit (a descriptor's /proc name), goes on.
// An absolute path already normal (the common case) is copied once into `full_path`, and its length is
// what `full_length` (when given) receives on a match: strlen(full_path).
// `known`: name_match_of(path, length) when the caller has it (kYes: the name is not compared again).
// Its common case inline (issue 27: in the caller's frame), any other path out of line:
// matched_by_made_path.
[[gnu::always_inline]] inline bool matched_by_name_slowly(int dirfd, const char* path, size_t length,
                                                          char* full_path, size_t* full_length = nullptr,
                                                          NameMatch known = NameMatch::kMaybe);
// The first bytes of a descriptor's /proc name ("/proc/", "/dev/fd/"): the rest is told out of line. Its
// second byte first: most paths are told by it.
[[gnu::always_inline]] inline bool starts_like_a_descriptor_name(std::string_view path) {
  if (path.size() < 6 || (path[1] != 'p' && path[1] != 'd')) return false;
  return path.starts_with("/proc/") || path.starts_with("/dev/fd/");
}
// matched_by_name_slowly of any path but an absolute one already normal, not a descriptor's /proc name
// (relative, not normal, a /proc name, too long), or of one that did not match as given: made, then
// matched.
bool matched_by_made_path(int dirfd, const char* path, size_t length, char* full_path, size_t* full_length);
[[gnu::always_inline]] inline bool matched_by_name_slowly(int dirfd, const char* path, size_t length,
                                                          char* full_path, size_t* full_length,
                                                          NameMatch known) {
  // The common case (PyTorch and safetensors open absolute paths): an absolute path already normal, not a
  // descriptor's /proc name, is its own full path, copied once; "*.ext" is told by its ending (issue 27),
  // which the caller may have compared already (`known`). Any other, and a path that does not match (which
  // may match through a symlinked directory), is made.
  const std::string_view given(path, length);
  if (__builtin_expect(full_path != nullptr && length < kMaxPath, 1) &&
      !starts_like_a_descriptor_name(given) && copy_plainly_normal_absolute(given, full_path) &&
      (known == NameMatch::kYes || g_config->paths.matches_path(given))) {
    if (full_length) *full_length = length;
    return true;
  }
  return matched_by_made_path(dirfd, path, length, full_path, full_length);
}
// What the name's ending tells without a path buffer (PatternSet::name_match): kNo when matched_by_name is
// surely false; a name ending with a digit may be a descriptor's /proc name (its target is matched).
[[gnu::always_inline]] inline NameMatch name_match_of(const char* path, size_t length) {
  const char last = length ? path[length - 1] : '\0';
  if (last >= '0' && last <= '9') return NameMatch::kMaybe;
  return g_config->paths.name_match({path, length});
}
// False when matched_by_name is surely false, without a path buffer.
inline bool may_match_by_name(const char* path, size_t length) {
  return name_match_of(path, length) != NameMatch::kNo;
}
inline bool matched_by_name(int dirfd, const char* path, size_t length, char* full_path) {
  if (!may_match_by_name(path, length)) return false;
  return matched_by_name_slowly(dirfd, path, length, full_path);
}
inline bool matched_by_name(int dirfd, const char* path, char* full_path) {
  return matched_by_name(dirfd, path, __builtin_strlen(path), full_path);
}
// Whether a write open of `path` (against `dirfd`) is on an append-only mount: then `full_path` (kMaxPath
// bytes) receives its absolute, normalized path. A path already normal is compared with the few
// append-only mount points as given (a relative one with the working directory's name), without being
// made (issue 27); any other is resolved and looked up.
bool on_append_only_mount(int dirfd, const char* path, size_t length, char* full_path);
// Its two steps: true when the path is surely on no append-only mount (no path buffer needed), and the
// lookup of the path made (into `full_path`) for one that may be.
bool surely_off_append_only_mounts(int dirfd, const char* path, size_t length);
bool on_append_only_mount_made(int dirfd, const char* path, char* full_path);
inline bool on_append_only_mount(int dirfd, const char* path, char* full_path) {
  return on_append_only_mount(dirfd, path, __builtin_strlen(path), full_path);
}
// An absolute, normalized path guarded by name or by its mount.
bool guards_full_path(const char* full_path);
// truncate(path) and the like on a guarded path: `full_path` (kMaxPath bytes) receives it.
bool guarded_path(const char* path, char* full_path);
bool guarded_path_at(int dirfd, const char* path, char* full_path);

}  // namespace appendguard
