// open(2) flag classification and the enforce-mode rewrite. Pure.
#pragma once

#include <fcntl.h>

#include <cstddef>

namespace appendguard {

// Opens that can modify the file: write access, or O_TRUNC with any access mode.
inline bool is_write_open(int flags) {
  return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC) != 0;
}

// Enforce mode: O_RDWR becomes O_WRONLY|O_APPEND; any other write open that does not truncate gets
// O_APPEND (on HDFS a plain O_WRONLY open replaces the file). Every other flag is kept.
int rewrite_open_flags(int flags);

// "O_RDWR|O_CREAT|O_CLOEXEC" into out (NUL-terminated, truncated to capacity). Returns the length.
size_t format_open_flags(int flags, char* out, size_t capacity);

}  // namespace appendguard
