#include "cli/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace appendguard {
namespace {

// Appends what `fd` holds to `out`; stops with an error past `limit` bytes.
bool read_all(int fd, size_t limit, size_t max_line, InputFile& result) {
  char buffer[64 * 1024];
  size_t line_start = 0;  // where the last line began in result.data
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      result.error = std::strerror(errno);
      return false;
    }
    if (n == 0) return true;
    if (result.data.size() + static_cast<size_t>(n) > limit) {
      result.error = "more than " + std::to_string(limit >> 20) + " MiB (give a log file instead)";
      return false;
    }
    size_t old_size = result.data.size();
    result.data.append(buffer, static_cast<size_t>(n));
    for (size_t i = result.data.size(); i > old_size; --i) {
      if (result.data[i - 1] == '\n') {
        line_start = i;
        break;
      }
    }
    if (result.data.size() - line_start > max_line) {
      result.error = "a line longer than " + std::to_string(max_line >> 20) + " MiB: not a text log";
      return false;
    }
  }
}

}  // namespace

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

InputFile read_regular_file(const std::string& path) {
  InputFile result;
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    result.error = std::strerror(errno);
    return result;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    result.error = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    result.error = std::string("is ") + file_type_name(st.st_mode) + ", not a regular file";
  } else {
    result.mode = st.st_mode;
    result.ok = read_all(fd, static_cast<size_t>(-1), static_cast<size_t>(-1), result);
  }
  close(fd);
  if (!result.ok) result.data.clear();
  return result;
}

InputFile read_bounded(int fd, size_t limit, size_t max_line) {
  InputFile result;
  result.ok = read_all(fd, limit, max_line, result);
  if (!result.ok) result.data.clear();
  return result;
}

}  // namespace appendguard
