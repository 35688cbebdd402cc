// Which paths are guarded: by name (APPENDGUARD_PATHS) or by being on an append-only mount, and the
// absolute, normalized paths the decision is made on.
#pragma once

#include <cstddef>

#include "core/glob.h"
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
bool matched_by_name_slowly(int dirfd, const char* path, size_t length, char* full_path,
                            size_t* full_length = nullptr, NameMatch known = NameMatch::kMaybe);
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
