// Which paths are guarded: by name (APPENDGUARD_PATHS) or by being on an append-only mount, and the
// absolute, normalized paths the decision is made on.
#pragma once

#include <cstddef>

namespace appendguard {

// `path` made absolute against `dirfd` (AT_FDCWD: the working directory) and normalized, into `out`
// (kMaxPath bytes).
bool resolve_full_path(int dirfd, const char* path, char* out);
// The path the kernel has for `fd` (readlink of /proc/self/fd/N), NUL-terminated.
bool descriptor_path(int fd, char* out, size_t capacity);

// APPENDGUARD_PATHS: fills `full_path` (absolute and normalized where it can be resolved) when it matches.
// A pattern with '/' matches the path as given (made absolute) or the same path with the symlinks of its
// directory resolved, so that a file is guarded however it is named (absolute, relative, openat).
bool matched_by_name(int dirfd, const char* path, char* full_path);
// An absolute, normalized path guarded by name or by its mount.
bool guards_full_path(const char* full_path);
// truncate(path) and the like on a guarded path: `full_path` (kMaxPath bytes) receives it.
bool guarded_path(const char* path, char* full_path);
bool guarded_path_at(int dirfd, const char* path, char* full_path);

}  // namespace appendguard
