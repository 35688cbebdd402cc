// open, openat, creat and their 64-bit and fortified names.

#include "core/open_flags.h"
#include "shim/append_only_attribute.h"
#include "shim/guard_descriptor.h"
#include "shim/guard_open.h"
#include "shim/held_sessions.h"
#include "shim/hook.h"
#include "shim/syscall_dispatch.h"
#include "shim/unguarded_notice.h"

using namespace appendguard;

namespace {

// The canonical frame address of the function this is expanded in (where its caller's frame begins): for
// OpenRequest::cfa. Under GCC a lea from the stack pointer; clang's builtin would give the function a frame
// pointer, so there the site's recording uses its own (0: not known).
#if defined(__clang__)
#define APPENDGUARD_OPEN_CFA() static_cast<uintptr_t>(0)
#else
#define APPENDGUARD_OPEN_CFA() reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa())
#endif

// A write open, or any open while tracing: decided, and tracked if guarded. Out of line: its decision
// (with a path buffer) must not give the read-only path a frame, nor the unmatched write open below.
// Where the hook, open_slow and open_deciding reach it by tail calls (open, open64 under GCC), its
// canonical frame address is the hook's, the program's call, else one of this library's frames below it:
// the open's site is read back from the stack above it (OpenRequest::cfa).
template <typename Call>
[[gnu::noinline]] int open_with_decision(const char* function, int dirfd, const char* path, int flags,
                                         Call call, WriteOpenTriage triage = {}) {
  OpenRequest request{
      function, dirfd, path, flags, triage.measured_length, triage.name_may_match, APPENDGUARD_OPEN_CFA()};
  OpenDecision decision;
  decide_open(request, decision);
  if (!decision.guarded && !decision.trace_only) {
    int fd = call(flags);
    if (__builtin_expect(fd >= 0, 1)) {
      // A new file of its own (a temporary one): raw calls are trapped while it is open (its rename).
      if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) note_exclusive_create(fd);
      return forget_if_stale(fd);
    }
    // A file with the kernel's append-only attribute: opened again with O_APPEND, guarded (issue 23),
    // by the one call of open_as_decided below (a second copy of it would grow every write open's frame).
    // Its path is made again there: the length decide_open may have left no longer says.
    decision.path_length = 0;
    if (errno != EPERM || !decide_append_only_retry(request, decision)) {
      note_unguarded_open_failure(function, dirfd, path, errno);
      return fd;
    }
  }
  return open_as_decided(request, decision, call);
}

// A write open left alone that failed with EPERM: a file with the kernel's append-only attribute is
// opened again with O_APPEND, guarded (issue 23), as open_with_decision does; the decision is the one
// decide_open makes for an open it leaves alone (the flags as asked).
template <typename Call>
[[gnu::noinline]] int open_append_only_retry(const char* function, int dirfd, const char* path, int flags,
                                             Call call) {
  OpenRequest request{function, dirfd, path, flags};
  request.cfa = APPENDGUARD_OPEN_CFA();
  OpenDecision decision;
  decision.flags = flags;
  if (!decide_append_only_retry(request, decision)) {
    note_unguarded_open_failure(function, dirfd, path, errno);
    return -1;
  }
  return open_as_decided(request, decision, call);
}

// A write open that decide_open would surely leave alone is made without a decision (issue 27: its
// construction and decide_open's frame were a fifth of an unmatched write open's cost); what follows the
// call is open_with_decision's for such an open, whose rare EPERM (the append-only attribute) it decides.
template <typename Call>
[[gnu::noinline]] int open_deciding(const char* function, int dirfd, const char* path, int flags, Call call) {
  if (!is_write_open(flags)) return open_with_decision(function, dirfd, path, flags, call);
  const WriteOpenTriage triage = write_open_triage(dirfd, path);
  if (triage.measured_length != 0) return open_with_decision(function, dirfd, path, flags, call, triage);
  const int fd = call(flags);
  if (__builtin_expect(fd >= 0, 1)) {
    if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) note_exclusive_create(fd);
    return forget_if_stale(fd);
  }
  if (errno == EPERM) return open_append_only_retry(function, dirfd, path, flags, call);
  note_unguarded_open_failure(function, dirfd, path, errno);
  return fd;
}

// Read-only opens are only of interest to the trace, and to a held session of the file (committed
// first, so that the reader sees its bytes).
inline bool read_only_open_of_no_interest(int flags) {
  return !is_write_open(flags) && !g_config->trace && !any_held_sessions();
}

// Whether the runtime state (read by the caller) is a mode in force, enforce or audit: g_config is set.
constexpr bool settled(int state) {
  return state == static_cast<int>(RuntimeState::kEnforce) || state == static_cast<int>(RuntimeState::kAudit);
}

// open_slow's other opens: a read-only one (traced, or with held sessions), or any before the mode is
// settled (the first open may initialize).
template <typename Call>
[[gnu::noinline]] int open_slow_otherwise(const char* function, int dirfd, const char* path, int flags,
                                          Call call) {
  if (current_mode() == Mode::kOff) return call(flags);
  if (!is_write_open(flags) && !g_config->trace) {
    if (any_held_sessions()) commit_held_before_read(dirfd, path);
    return forget_if_stale(call(flags));
  }
  return open_deciding(function, dirfd, path, flags, call);
}

// Every open but a read-only one of no interest in a settled mode. A write open in a settled mode goes on
// to open_deciding without a frame of its own (issue 27: every write open's); any other, out of line.
template <typename Call>
[[gnu::noinline]] int open_slow(const char* function, int dirfd, const char* path, int flags, Call call) {
  if (__builtin_expect(settled(g_runtime_state.load(std::memory_order_acquire)) && is_write_open(flags), 1))
    return open_deciding(function, dirfd, path, flags, call);
  return open_slow_otherwise(function, dirfd, path, flags, call);
}

template <typename Call>
[[gnu::always_inline]] inline int open_hook(const char* function, int dirfd, const char* path, int flags,
                                            Call&& call) {
  const int state = g_runtime_state.load(std::memory_order_acquire);
  if (__builtin_expect(state == static_cast<int>(RuntimeState::kOff), 1)) return call(flags);
  if (__builtin_expect(settled(state) && read_only_open_of_no_interest(flags), 1))
    return forget_if_stale(call(flags));
  return open_slow(function, dirfd, path, flags, call);
}

}  // namespace

// open's mode is a variadic argument, read only with O_CREAT or O_TMPFILE. On x86-64 a variadic integer
// argument travels in the register a third fixed parameter would use (the System V ABI; the caller's
// %al, the count of vector registers, is ignored here), so these hooks take it as one: a va_list would
// give every open a frame of its own. Their C++ names differ from the variadic declarations of
// <fcntl.h>; the symbols are the libc names. Without O_CREAT or O_TMPFILE `mode` is whatever the
// register holds, and is passed on unread, as libc itself would leave it.
#if !defined(__x86_64__)
#error "the open hooks read the variadic mode as a fixed parameter: check the calling convention here"
#endif

APPENDGUARD_HOOK int open_hook_with_mode(const char* path, int flags, mode_t mode) __asm__("open");
int open_hook_with_mode(const char* path, int flags, mode_t mode) {
  return open_hook("open", AT_FDCWD, path, flags, [=](int f) { return real_open(path, f, mode); });
}

APPENDGUARD_HOOK int open64_hook_with_mode(const char* path, int flags, mode_t mode) __asm__("open64");
int open64_hook_with_mode(const char* path, int flags, mode_t mode) {
  return open_hook("open64", AT_FDCWD, path, flags, [=](int f) { return real_open64(path, f, mode); });
}

APPENDGUARD_HOOK int openat_hook_with_mode(int dirfd, const char* path, int flags,
                                           mode_t mode) __asm__("openat");
int openat_hook_with_mode(int dirfd, const char* path, int flags, mode_t mode) {
  return open_hook("openat", dirfd, path, flags, [=](int f) { return real_openat(dirfd, path, f, mode); });
}

APPENDGUARD_HOOK int openat64_hook_with_mode(int dirfd, const char* path, int flags,
                                             mode_t mode) __asm__("openat64");
int openat64_hook_with_mode(int dirfd, const char* path, int flags, mode_t mode) {
  return open_hook("openat64", dirfd, path, flags,
                   [=](int f) { return real_openat64(dirfd, path, f, mode); });
}

// The fortified entry points take no mode: the caller's flags have neither O_CREAT nor O_TMPFILE, and the
// rewrite never adds them.
APPENDGUARD_HOOK int __open_2(const char* path, int flags) {
  return open_hook("__open_2", AT_FDCWD, path, flags, [=](int f) { return real___open_2(path, f); });
}

APPENDGUARD_HOOK int __open64_2(const char* path, int flags) {
  return open_hook("__open64_2", AT_FDCWD, path, flags, [=](int f) { return real___open64_2(path, f); });
}

APPENDGUARD_HOOK int __openat_2(int dirfd, const char* path, int flags) {
  return open_hook("__openat_2", dirfd, path, flags, [=](int f) { return real___openat_2(dirfd, path, f); });
}

APPENDGUARD_HOOK int __openat64_2(int dirfd, const char* path, int flags) {
  return open_hook("__openat64_2", dirfd, path, flags,
                   [=](int f) { return real___openat64_2(dirfd, path, f); });
}

// creat() truncates, so its flags are never rewritten; it is tracked like any other write open.
APPENDGUARD_HOOK int creat(const char* path, mode_t mode) {
  return open_hook("creat", AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC,
                   [=](int f) { return real_open(path, f, mode); });
}

APPENDGUARD_HOOK int creat64(const char* path, mode_t mode) {
  return open_hook("creat64", AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC,
                   [=](int f) { return real_open64(path, f, mode); });
}

// A raw openat2 trapped by the system call layer (syscall_dispatch.cpp): openat's decision, and the call
// made with the program's open_how (its resolve flags kept) with the flags as decided.
int appendguard::openat2_through_hook(int dirfd, const char* path, const open_how* how, size_t size) {
  open_how asked = *how;  // the handler passes only a complete open_how
  (void)size;
  return open_hook("openat2", dirfd, path, static_cast<int>(asked.flags), [=](int f) {
    open_how decided = asked;
    decided.flags = static_cast<unsigned int>(f);
    return static_cast<int>(syscall(SYS_openat2, dirfd, path, &decided, sizeof decided));
  });
}
