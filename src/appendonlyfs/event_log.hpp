// The refusal/fault log: one `key=value` line per event, appended and flushed line by line.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace appendonlyfs {

// "EOPNOTSUPP", "EPERM", ...; falls back to the number for errnos we never produce.
std::string errno_name(int error);

// "O_WRONLY|O_CREAT|O_TRUNC": the flags the rules look at, for log lines.
std::string open_flags_text(int flags);

// Builds e.g. `refused write path=/a offset=0 size=10 end=20 errno=EOPNOTSUPP profile=hdfs`.
class LogLine {
 public:
  LogLine(std::string_view event, std::string_view operation);
  LogLine& field(std::string_view key, std::string_view value);
  LogLine& field(std::string_view key, std::uint64_t value);
  LogLine& error(int error) { return field("errno", errno_name(error)); }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

class EventLog {
 public:
  EventLog() = default;
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Returns 0 or the errno of the failed open.
  int open(const std::string& path);
  bool enabled() const { return fd_ >= 0; }
  void write(const LogLine& line);

 private:
  int fd_ = -1;
  std::mutex mutex_;
};

}  // namespace appendonlyfs
