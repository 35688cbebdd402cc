#include "event_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/config.h"
#include "core/write_all.h"
#include "report/escape.h"
#include "report/text_buffer.h"

namespace appendonlyfs {

// The library's table names 95 EOPNOTSUPP (== ENOTSUP on Linux; fuse_dfs's "ENOTSUP" is this value).
std::string errno_name(int error) {
  const char* name = appendguard::errno_name(error);
  return std::strcmp(name, "E?") == 0 ? std::to_string(error) : name;
}

std::string open_flags_text(int flags) {
  std::string text;
  switch (flags & O_ACCMODE) {
    case O_RDONLY:
      text = "O_RDONLY";
      break;
    case O_WRONLY:
      text = "O_WRONLY";
      break;
    default:
      text = "O_RDWR";
  }
  if (flags & O_CREAT) text += "|O_CREAT";
  if (flags & O_EXCL) text += "|O_EXCL";
  if (flags & O_TRUNC) text += "|O_TRUNC";
  if (flags & O_APPEND) text += "|O_APPEND";
  return text;
}

LogLine::LogLine(std::string_view event, std::string_view operation) {
  text_.append(event).append(" ").append(operation);
}

// Values are escaped as the library's reports escape paths (report/escape.h): a file name with a
// newline, a space or a control byte can neither start a line of its own nor split a field.
LogLine& LogLine::field(std::string_view key, std::string_view value) {
  char storage[appendguard::kMaxEscapedText + 64];
  appendguard::TextBuffer escaped(storage, sizeof storage);
  appendguard::add_escaped_path(escaped, value);
  text_.append(" ").append(key).append("=").append(escaped.view());
  return *this;
}

LogLine& LogLine::field(std::string_view key, std::uint64_t value) {
  return field(key, std::string_view(std::to_string(value)));
}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

int EventLog::open(const std::string& path) {
  // Never through a symlink (ELOOP), never blocking on a FIFO, only a regular file; a new log is 0600.
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    ::close(fd);
    return EINVAL;
  }
  fd_ = fd;
  return 0;
}

void EventLog::write(const LogLine& line) {
  if (fd_ < 0) return;
  const std::string text = line.text() + "\n";
  std::lock_guard lock(mutex_);
  // One write(2) per line on an O_APPEND fd: lines from concurrent writers never interleave.
  appendguard::write_all(text.size(), [&](std::uint64_t done, std::uint64_t left) {
    return ::write(fd_, text.data() + done, left);
  });
}

}  // namespace appendonlyfs
