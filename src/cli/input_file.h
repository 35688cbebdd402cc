// Reading the files the launcher is given (logs, programs) without ever blocking or reading forever: only
// regular files are read whole; anything else is refused with a reason, or read up to a bound.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace appendguard {

struct InputFile {
  bool ok = false;
  std::string error;  // e.g. "is a directory, not a regular file", or strerror
  std::string data;
  mode_t mode = 0;  // st_mode: the set-uid and set-gid bits
};

// Reads the regular file at `path`. The open is non-blocking, so a FIFO never blocks it.
InputFile read_regular_file(const std::string& path);

// Reads descriptor `fd` to its end, refusing more than `limit` bytes or a line longer than `max_line`
// (standard input may be /dev/zero).
InputFile read_bounded(int fd, size_t limit, size_t max_line);

// "a directory", "a FIFO", "a character device", ...
const char* file_type_name(mode_t mode);

}  // namespace appendguard
