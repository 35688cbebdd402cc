#include "event_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/config.h"
#include "core/write_all.h"

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

LogLine& LogLine::field(std::string_view key, std::string_view value) {
  text_.append(" ").append(key).append("=").append(value);
  return *this;
}

LogLine& LogLine::field(std::string_view key, std::uint64_t value) {
  return field(key, std::string_view(std::to_string(value)));
}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

int EventLog::open(const std::string& path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  return fd_ >= 0 ? 0 : errno;
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
