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
// O_APPEND (on HDFS a plain O_WRONLY open replaces the file). A truncating O_RDWR open ("w+b") becomes
// O_WRONLY|O_TRUNC as "wb" is, without O_APPEND: the file starts empty, and rclone --vfs-cache-mode off
// fails every write of an O_APPEND|O_TRUNC descriptor of an existing file (ESPIPE), leaving it emptied.
// Every other flag is kept. Inline: every guarded open asks (issue 27).
inline int rewrite_open_flags(int flags) {
  if (!is_write_open(flags)) return flags;
  if ((flags & O_ACCMODE) == O_RDWR)
    return (flags & ~O_ACCMODE) | O_WRONLY | ((flags & O_TRUNC) ? 0 : O_APPEND);
  if ((flags & O_ACCMODE) == O_WRONLY && !(flags & O_TRUNC)) return flags | O_APPEND;
  return flags;
}

// A write open that keeps what the file holds (no O_TRUNC): the case APPENDGUARD_REOPEN decides.
inline bool keeps_existing_bytes(int flags) {
  return (flags & O_ACCMODE) != O_RDONLY && !(flags & O_TRUNC) && (flags & O_TMPFILE) != O_TMPFILE;
}

// APPENDGUARD_REOPEN=rewrite: a write-only truncating open (the existing bytes are written back by the
// caller). O_CREAT, O_EXCL, O_CLOEXEC and the rest are kept; O_APPEND is dropped.
int rewrite_open_flags_by_truncation(int flags);

// "O_RDWR|O_CREAT|O_CLOEXEC" into out (NUL-terminated, truncated to capacity). Returns the length.
size_t format_open_flags(int flags, char* out, size_t capacity);

}  // namespace appendguard
