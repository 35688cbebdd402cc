#include "report/log_sink.h"

#include "core/config.h"
#include "core/write_all.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace appendguard {
namespace {

long raw_write(int fd, const char* data, size_t size) {
  return syscall(SYS_write, fd, data, size);
}

bool raw_fstat(int fd, struct stat& st) {
  return syscall(SYS_fstat, fd, &st) == 0;
}

// The kernel's signal set (8 bytes on Linux), for the raw system calls: no libc wrapper, so a report in a
// signal handler or a hook never re-enters anything.
constexpr size_t kKernelSigsetSize = 8;

bool sigpipe_pending() {
  sigset_t pending;
  sigemptyset(&pending);
  if (syscall(SYS_rt_sigpending, &pending, kKernelSigsetSize) != 0) return false;
  return sigismember(&pending, SIGPIPE) == 1;
}

// Writes all of `text`, retrying short writes and EINTR. Returns 0, or the errno that stopped it. A log
// whose reader is gone must not kill the host: SIGPIPE is blocked in this thread around the write, and the
// SIGPIPE this write raised is consumed, unless one was already pending for the program (then it stays).
int write_fully(int fd, std::string_view text) {
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigset_t previous;
  sigemptyset(&previous);
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, &pipe_only, &previous, kKernelSigsetSize);
  bool was_pending = sigpipe_pending();
  int error = write_all(text.size(), [&](uint64_t done, uint64_t left) {
                return raw_write(fd, text.data() + done, left);
              }).error_or_eio();
  if (error == EPIPE && !was_pending) {
    struct timespec zero = {0, 0};
    int saved = errno;
    syscall(SYS_rt_sigtimedwait, &pipe_only, nullptr, &zero, kKernelSigsetSize);
    errno = saved;
  }
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &previous, nullptr, kKernelSigsetSize);
  return error;
}

void write_notice(std::string_view text) {
  write_fully(STDERR_FILENO, text);
}

}  // namespace

bool expand_log_path(std::string_view templ, pid_t pid, std::string_view host, std::string_view rank,
                     char* out, size_t capacity) {
  size_t len = 0;
  auto put = [&](std::string_view s) {
    if (len + s.size() + 1 > capacity) return false;
    std::memcpy(out + len, s.data(), s.size());
    len += s.size();
    return true;
  };
  char pid_text[24];
  auto pid_end = fmt::format_to_n(pid_text, sizeof pid_text, "{}", pid);
  std::string_view pid_view(pid_text, pid_end.size);
  for (size_t i = 0; i < templ.size(); ++i) {
    bool ok = true;
    if (templ[i] == '%' && i + 1 < templ.size()) {
      char c = templ[++i];
      if (c == 'p') {
        ok = put(pid_view);
      } else if (c == 'h') {
        ok = put(host);
      } else if (c == 'r') {
        ok = put(rank);
      } else if (c == '%') {
        ok = put("%");
      } else {
        char both[2] = {'%', c};
        ok = put({both, 2});
      }
    } else {
      ok = put({&templ[i], 1});
    }
    if (!ok) return false;
  }
  if (capacity == 0) return false;
  out[len] = '\0';
  return true;
}

const char* rank_from_environment() {
  for (const char* name : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}) {
    const char* value = secure_getenv(name);
    if (value && *value) return value;
  }
  return "0";
}

int LogSink::descriptor_for_this_process() {
  pid_t pid = static_cast<pid_t>(syscall(SYS_getpid));
  if (fd_ >= 0 && opened_by_ == pid) {
    struct stat st;
    if (raw_fstat(fd_, st) && st.st_dev == device_ && st.st_ino == inode_) return fd_;
    fd_ = -1;  // the program closed it or put something else at that number: never write there
  }
  // A forked child inherited the parent's log descriptor; it may have closed it and reused the number, so
  // it is only forgotten, never closed (close-on-exec drops it at exec).
  if (fd_ >= 0 && opened_by_ != pid) fd_ = -1;
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  char* path = path_;
  if (!expand_log_path(target_, pid, host, rank_from_environment(), path, sizeof path_)) {
    if (warned_about_ != pid) {
      warned_about_ = pid;
      format_notice(
          "appendguard: cannot open APPENDGUARD_LOG file '{}': its expanded path is longer than {} "
          "bytes: reports go to stderr\n",
          target_, sizeof path_ - 1);
    }
    return -1;
  }
  // Non-blocking: a FIFO without a reader fails the open (ENXIO) instead of blocking the host, and a full
  // pipe fails the write (EAGAIN).
  int fd = static_cast<int>(syscall(
      SYS_openat, AT_FDCWD, path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644));
  if (fd < 0) {
    if (warned_about_ != pid) {
      warned_about_ = pid;
      format_notice("appendguard: cannot open APPENDGUARD_LOG file '{}' ({}): reports go to stderr\n", path,
                    errno_name(errno));
    }
    return -1;
  }
  struct stat st;
  if (!raw_fstat(fd, st)) {
    syscall(SYS_close, fd);
    return -1;
  }
  fd_ = fd;
  opened_by_ = pid;
  device_ = st.st_dev;
  inode_ = st.st_ino;
  return fd_;
}

template <typename... Args>
void LogSink::format_notice(fmt::format_string<Args...> format, Args&&... args) {
  auto n = fmt::format_to_n(notice_, sizeof notice_, format, std::forward<Args>(args)...);
  write_notice({notice_, n.size < sizeof notice_ ? n.size : sizeof notice_});
}

void LogSink::write_to_stderr(std::string_view text) {
  write_fully(STDERR_FILENO, text);
}

bool LogSink::write(std::string_view text) {
  if (std::strcmp(target_, "stderr") == 0) {
    write_fully(STDERR_FILENO, text);
    return false;
  }
  int fd = descriptor_for_this_process();
  // A log that cannot be opened must not swallow the report.
  if (fd < 0) {
    write_fully(STDERR_FILENO, text);
    return false;
  }
  int error = write_fully(fd, text);
  if (error == 0) return true;
  // EAGAIN (a full pipe), EPIPE (its reader is gone), ENOSPC (/dev/full, a full disk): the report goes to
  // stderr, after one notice per process.
  pid_t pid = opened_by_;
  if (write_warned_about_ != pid) {
    write_warned_about_ = pid;
    format_notice(
        "appendguard: cannot write to APPENDGUARD_LOG file '{}' ({}): this and later reports that "
        "cannot be written there go to stderr\n",
        path_, errno_name(error));
  }
  write_fully(STDERR_FILENO, text);
  return false;
}

}  // namespace appendguard
