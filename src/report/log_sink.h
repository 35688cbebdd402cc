// Where reports go: stderr, or a file named by a template (%p pid, %h host name, %r rank, %% a percent).
// Writes use raw system calls, so a report never re-enters the hooks.
#pragma once

#include <sys/types.h>

#include <fmt/format.h>

#include <cstddef>
#include <string_view>

namespace appendguard {

// Expands the template into `out` (NUL-terminated). Returns false if it does not fit.
bool expand_log_path(std::string_view templ, pid_t pid, std::string_view host, std::string_view rank,
                     char* out, size_t capacity);

// RANK, else SLURM_PROCID, else OMPI_COMM_WORLD_RANK, else "0".
const char* rank_from_environment();

class LogSink {
 public:
  constexpr LogSink() = default;
  // `target` is "stderr" or a path template; it must stay alive for the life of the process.
  void configure(const char* target) { target_ = target; }
  // Writes all of `text`, retrying short writes and EINTR. The file is opened on first use, append-only,
  // close-on-exec, non-blocking and never through a symlink, and again in a forked child (%p) or if the
  // program closed or replaced our descriptor. It never blocks the host (a FIFO without a reader, a full
  // pipe) nor kills it (SIGPIPE); what cannot be written goes to stderr after one notice. Call it under
  // the reporter's lock (the path and notice buffers are members, not on the stack). Returns true when
  // the text went to the log file, false when it went to stderr.
  bool write(std::string_view text);
  // The expanded path of the log file last written (valid after write returned true).
  const char* file_path() const { return path_; }
  // Writes `text` to stderr whatever the target (a line for the job's terminal beside its log file).
  static void write_to_stderr(std::string_view text);

 private:
  int descriptor_for_this_process();
  template <typename... Args>
  void format_notice(fmt::format_string<Args...> format, Args&&... args);

  const char* target_ = "stderr";
  int fd_ = -1;
  pid_t opened_by_ = 0;
  dev_t device_ = 0;
  ino_t inode_ = 0;
  pid_t warned_about_ = 0;        // the process that was told its log cannot be opened
  pid_t write_warned_about_ = 0;  // the process that was told its log cannot be written
  char path_[4096] = {};          // the expanded path of the open log
  char notice_[4096 + 256] = {};
};

}  // namespace appendguard
