// open, openat, creat and their 64-bit and fortified names.
#include <stdarg.h>

#include "core/open_flags.h"
#include "shim/guard_descriptor.h"
#include "shim/guard_open.h"
#include "shim/held_sessions.h"
#include "shim/hook.h"
#include "shim/unguarded_notice.h"

using namespace appendguard;

namespace {

template <typename Call>
int open_hook(const char* function, int dirfd, const char* path, int flags, Call&& call) {
  if (__builtin_expect(current_mode() == Mode::kOff, 1)) return call(flags);
  // Read-only opens are only of interest to the trace, and to a held session of the file (committed
  // first, so that the reader sees its bytes).
  if (__builtin_expect(!is_write_open(flags) && !g_config->trace, 1)) {
    if (__builtin_expect(any_held_sessions(), 0)) commit_held_before_read(dirfd, path);
    return forget_if_stale(call(flags));
  }
  OpenRequest request{function, dirfd, path, flags};
  OpenDecision decision;
  decide_open(request, decision);
  if (!decision.guarded && !decision.trace_only) {
    int fd = call(flags);
    if (__builtin_expect(fd < 0, 0)) note_unguarded_open_failure(function, dirfd, path, errno);
    return forget_if_stale(fd);
  }
  return open_as_decided(request, decision, call);
}

}  // namespace

#define APPENDGUARD_MODE_ARG(flags) \
  mode_t mode = 0;                  \
  if (__OPEN_NEEDS_MODE(flags)) {   \
    va_list args;                   \
    va_start(args, flags);          \
    mode = va_arg(args, mode_t);    \
    va_end(args);                   \
  }

APPENDGUARD_HOOK int open(const char* path, int flags, ...) {
  APPENDGUARD_MODE_ARG(flags);
  return open_hook("open", AT_FDCWD, path, flags, [&](int f) { return real_open(path, f, mode); });
}

APPENDGUARD_HOOK int open64(const char* path, int flags, ...) {
  APPENDGUARD_MODE_ARG(flags);
  return open_hook("open64", AT_FDCWD, path, flags, [&](int f) { return real_open64(path, f, mode); });
}

APPENDGUARD_HOOK int openat(int dirfd, const char* path, int flags, ...) {
  APPENDGUARD_MODE_ARG(flags);
  return open_hook("openat", dirfd, path, flags, [&](int f) { return real_openat(dirfd, path, f, mode); });
}

APPENDGUARD_HOOK int openat64(int dirfd, const char* path, int flags, ...) {
  APPENDGUARD_MODE_ARG(flags);
  return open_hook("openat64", dirfd, path, flags,
                   [&](int f) { return real_openat64(dirfd, path, f, mode); });
}

// The fortified entry points take no mode: the caller's flags have neither O_CREAT nor O_TMPFILE, and the
// rewrite never adds them.
APPENDGUARD_HOOK int __open_2(const char* path, int flags) {
  return open_hook("__open_2", AT_FDCWD, path, flags, [&](int f) { return real___open_2(path, f); });
}

APPENDGUARD_HOOK int __open64_2(const char* path, int flags) {
  return open_hook("__open64_2", AT_FDCWD, path, flags, [&](int f) { return real___open64_2(path, f); });
}

APPENDGUARD_HOOK int __openat_2(int dirfd, const char* path, int flags) {
  return open_hook("__openat_2", dirfd, path, flags, [&](int f) { return real___openat_2(dirfd, path, f); });
}

APPENDGUARD_HOOK int __openat64_2(int dirfd, const char* path, int flags) {
  return open_hook("__openat64_2", dirfd, path, flags,
                   [&](int f) { return real___openat64_2(dirfd, path, f); });
}

// creat() truncates, so its flags are never rewritten; it is tracked like any other write open.
APPENDGUARD_HOOK int creat(const char* path, mode_t mode) {
  return open_hook("creat", AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC,
                   [&](int f) { return real_open(path, f, mode); });
}

APPENDGUARD_HOOK int creat64(const char* path, mode_t mode) {
  return open_hook("creat64", AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC,
                   [&](int f) { return real_open64(path, f, mode); });
}
