#include "shim/append_only_attribute.h"

#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/open_flags.h"
#include "core/unguarded_failure.h"
#include "report/report.h"
#include "shim/guarded_paths.h"
#include "shim/path_scratch.h"
#include "shim/runtime.h"

namespace appendguard {
namespace {

constinit ToldFiles g_told_append_only;

}  // namespace

bool has_append_only_attribute(int dirfd, const char* path) {
  int fd = real_openat(dirfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
  if (fd < 0) return false;
  int attributes = 0;
  // The raw system call: a program's ioctl hook (if any) has no business with ours.
  const bool read = syscall(SYS_ioctl, fd, FS_IOC_GETFLAGS, &attributes) == 0;
  real_close(fd);
  return read && (attributes & FS_APPEND_FL);
}

void say_append_only_refusal(const char* call, const char* path, const char* what) {
  PathLease message(2);
  if (!message.get()) return;
  AppendOnlyRefusal f;
  f.call = call;
  f.path = path;
  f.flags = what;
  InternalScope internal;
  format_append_only_refusal(f, message.get(), 2 * kMaxPath);
  report_notice(message.get());
}

bool decide_append_only_retry(const OpenRequest& request, OpenDecision& decision) {
  const int error = EPERM;
  if (!request.path || InternalScope::active() || current_mode() == Mode::kOff ||
      !is_write_open(request.flags)) {
    errno = error;
    return false;
  }
  InternalScope internal;
  bool retry = false;
  if (has_append_only_attribute(request.dirfd, request.path) && decision.take_path() &&
      resolve_full_path(request.dirfd, request.path, decision.path)) {
    const int rewritten = rewrite_open_flags(request.flags);
    if (current_mode() == Mode::kEnforce && retries_on_append_only_file(error, request.flags, rewritten)) {
      decision.guarded = true;
      decision.exists = true;
      decision.flags = rewritten;
      retry = true;
    } else if (g_told_append_only.first_time(path_key(decision.path))) {
      char flags_text[160];
      format_open_flags(request.flags, flags_text, sizeof flags_text);
      say_append_only_refusal(request.function, decision.path, flags_text);
    }
  }
  errno = error;
  return retry;
}

}  // namespace appendguard
