#include "report/log_sink.h"

#include "core/config.h"

#include <fcntl.h>
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

void write_fully(int fd, std::string_view text) {
  const char* data = text.data();
  size_t left = text.size();
  while (left > 0) {
    long n = raw_write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    left -= static_cast<size_t>(n);
  }
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
  char path[4096];
  if (!expand_log_path(target_, pid, host, rank_from_environment(), path, sizeof path)) return -1;
  int fd = static_cast<int>(
      syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (fd < 0) {
    if (warned_about_ != pid) {
      warned_about_ = pid;
      char line[4096 + 160];
      auto n =
          fmt::format_to_n(line, sizeof line,
                           "appendguard: cannot open APPENDGUARD_LOG file '{}' ({}): reports go to stderr\n",
                           path, errno_name(errno));
      write_fully(STDERR_FILENO, {line, n.size < sizeof line ? n.size : sizeof line});
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

void LogSink::write(std::string_view text) {
  if (std::strcmp(target_, "stderr") == 0) {
    write_fully(STDERR_FILENO, text);
    return;
  }
  int fd = descriptor_for_this_process();
  // A log that cannot be opened must not swallow the report.
  write_fully(fd >= 0 ? fd : STDERR_FILENO, text);
}

}  // namespace appendguard
