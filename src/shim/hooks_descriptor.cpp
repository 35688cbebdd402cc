// Positioning and the life of descriptors: lseek, dup, close, fcntl.
#include <fcntl.h>
#include <linux/close_range.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/syscall.h>

#include "shim/guard_descriptor.h"
#include "shim/guard_seek.h"
#include "shim/guarded.h"
#include "shim/held_sessions.h"
#include "shim/hook.h"
#include "shim/mount_guard.h"
#include "shim/trace.h"
#include "shim/unguarded_notice.h"

using namespace appendguard;

off_t guarded::lseek(int fd, off_t offset, int whence, Description* d) {
  return guarded_seek("lseek", fd, d, offset, whence, [&] { return real_lseek(fd, offset, whence); });
}

off64_t guarded::lseek64(int fd, off64_t offset, int whence, Description* d) {
  return guarded_seek("lseek64", fd, d, offset, whence, [&] { return real_lseek64(fd, offset, whence); });
}

namespace {

// A close of an untracked number while some FUSE mount is not guarded whole: its failure is looked at
// (unguarded_notice.h). Out of line, so that close's own path stays a tail call.
[[gnu::noinline]] int close_watched(int fd) {
  int result = real_close(fd);
  if (__builtin_expect(result < 0, 0)) note_unguarded_close_failure(fd, errno);
  return result;
}

}  // namespace

// Forget before closing: once closed, another thread may get the same number for a new file. A number
// we hold (the program closed it already: its slot is closed_by_program()) is not closed again: the
// program gets the EBADF a second close gets. One slot load on the untracked path.
APPENDGUARD_HOOK int close(int fd) {
  if (__builtin_expect(g_files.slot(fd) != nullptr, 0)) return close_taken_number(fd);
  if (__builtin_expect(g_files.watching_untracked_failures(), 0)) return close_watched(fd);
  return real_close(fd);
}

namespace {

// dup, dup2/dup3 from a number the program closed that a held session keeps open (closed_number,
// held_sessions.h), and fcntl on it: EBADF.
int bad_descriptor() {
  errno = EBADF;
  return -1;
}

}  // namespace

namespace {

// fsync/fdatasync of a guarded descriptor: the program wants the file committed, so its close will be
// the real one (held_sessions.h). PyTorch's per-rank shards are synced, then read by other ranks.
void note_sync(Description* d) {
  if (d->starts_session) d->commit_requested.store(true, std::memory_order_relaxed);
}

}  // namespace

// On a write-once store an fsync ends the upload, and every later write fails (mountpoint-s3: EIO,
// "upload already completed"). Programs write after it: DCP's FileSystemWriter fsyncs .metadata.tmp
// before Python's buffered writer has written it (the bytes go out at the close). There the sync is
// deferred to the file's real close, which ends the upload and whose error the program's close returns
// (a killed writer's close still ends it). Elsewhere fsync and fdatasync are passed through; on guarded
// files the trace shows them, since FUSE mounts report flush errors there.
template <typename Real>
int sync_guarded(const char* operation, int fd, Description* d, Real&& real) {
  // Pinned while it is read: a close racing on another thread may recycle it (its memory may then read
  // as zeros, core/page_pool.h); a recycled one is synced as an untracked number.
  if (!g_files.pin(d)) return real(fd);
  struct Unpin {
    Description* d;
    ~Unpin() { g_files.unpin(d); }
  } unpin{d};
  note_sync(d);
  const bool deferred = store_kind_of(d->path) == StoreKind::kWriteOnce;
  int result = deferred ? 0 : real(fd);
  if (tracing()) {
    keep_errno([&](int error) {
      trace(operation, fd, d->path, result, error, "%s",
            deferred ? "deferred to the close (write-once store)" : "");
    });
  }
  return result;
}

int guarded::fsync(int fd, Description* d) {
  return sync_guarded("fsync", fd, d, real_fsync);
}

int guarded::fdatasync(int fd, Description* d) {
  return sync_guarded("fdatasync", fd, d, real_fdatasync);
}

APPENDGUARD_HOOK int close_range(unsigned int first, unsigned int last, int flags) {
  bool closes = !(flags & CLOSE_RANGE_CLOEXEC) && first <= last &&
                !(flags & ~(CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE));
  if (closes && g_files.any_tracked()) note_close_range("close_range", first, last);
  if (closes && __builtin_expect(any_held_sessions(), 0)) commit_held_range(first, last, "by close_range");
  return real_close_range(first, last, flags);
}

APPENDGUARD_HOOK void closefrom(int lowfd) {
  if (lowfd >= 0 && g_files.any_tracked()) note_close_range("closefrom", static_cast<unsigned>(lowfd), ~0u);
  if (lowfd >= 0 && __builtin_expect(any_held_sessions(), 0))
    commit_held_range(static_cast<unsigned>(lowfd), ~0u, "by closefrom");
  real_closefrom(lowfd);
}

APPENDGUARD_HOOK int dup(int fd) {
  if (closed_number(fd)) return bad_descriptor();
  int result = real_dup(fd);
  if (__builtin_expect(result >= 0 && (g_files.lookup(fd) || g_files.slot(result)), 0)) {
    keep_errno([&](int) { note_duplicate("dup", fd, result); });
  }
  return result;
}

// dup2/dup3 onto a tracked number closes it in the kernel: the close's work first (guard_descriptor.h),
// unless the call is bound to fail because old_fd is not open (the program goes on using new_fd then).
[[gnu::noinline]] static void finish_replaced(int old_fd, int new_fd) {
  if (real_syscall(SYS_fcntl, old_fd, F_GETFD) >= 0) finish_before_implicit_close(new_fd);
}

// dup2/dup3 onto a number we hold would close the session behind our back: it is committed first (and
// a commit of that number by the committer thread is waited for, else its close would close the
// program's new descriptor). dup2/dup3 from a number the program closed fail EBADF.
APPENDGUARD_HOOK int dup2(int old_fd, int new_fd) {
  if (closed_number(old_fd)) return bad_descriptor();
  if (__builtin_expect(any_held_sessions(), 0) && old_fd != new_fd && new_fd >= 0)
    commit_held_range(static_cast<unsigned>(new_fd), static_cast<unsigned>(new_fd),
                      "before dup2 onto its number");
  if (__builtin_expect(g_files.lookup(new_fd) != nullptr, 0) && old_fd != new_fd)
    finish_replaced(old_fd, new_fd);
  int result = real_dup2(old_fd, new_fd);
  if (__builtin_expect(result >= 0 && old_fd != new_fd && (g_files.lookup(old_fd) || g_files.slot(new_fd)),
                       0)) {
    keep_errno([&](int) { note_duplicate("dup2", old_fd, result); });
  }
  return result;
}

APPENDGUARD_HOOK int dup3(int old_fd, int new_fd, int flags) {
  if (closed_number(old_fd)) return bad_descriptor();
  if (__builtin_expect(any_held_sessions(), 0) && old_fd != new_fd && new_fd >= 0)
    commit_held_range(static_cast<unsigned>(new_fd), static_cast<unsigned>(new_fd),
                      "before dup3 onto its number");
  if (__builtin_expect(g_files.lookup(new_fd) != nullptr, 0) && old_fd != new_fd)
    finish_replaced(old_fd, new_fd);
  int result = real_dup3(old_fd, new_fd, flags);
  if (__builtin_expect(result >= 0 && (g_files.lookup(old_fd) || g_files.slot(new_fd)), 0)) {
    keep_errno([&](int) { note_duplicate("dup3", old_fd, result); });
  }
  return result;
}

namespace {

// fcntl's third argument is an int or a pointer depending on the command; both travel in one register
// (glibc's own fcntl reads it as a pointer too).
// F_DUPFD/F_DUPFD_CLOEXEC need no wait for a commit in flight: they take the lowest free number at or
// above the argument, and a held number (committed or not) is open in the kernel until its real close,
// so they can only get it after that close, as any open can (its stale slot is then replaced).
template <typename Real>
int fcntl_hook(const char* operation, int fd, int cmd, void* arg, Real&& real) {
  if (closed_number(fd)) return bad_descriptor();
  if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
    int result = real(arg);
    if (__builtin_expect(result >= 0 && (g_files.lookup(fd) || g_files.slot(result)), 0)) {
      keep_errno([&](int) { note_duplicate(operation, fd, result); });
    }
    return result;
  }
  if (__builtin_expect(g_files.lookup(fd) == nullptr, 1)) return real(arg);
  Description* d = tracked_description(fd);
  if (cmd != F_SETFL || !d) return real(arg);
  int requested = static_cast<int>(reinterpret_cast<intptr_t>(arg));
  int applied = setfl_flags(d, requested);
  int result = real(reinterpret_cast<void*>(static_cast<intptr_t>(applied)));
  keep_errno([&](int error) {
    note_setfl(fd, d, requested, applied, result);
    if (tracing()) {
      trace(operation, fd, d->path, result, error, "F_SETFL %#x (applied %#x)", requested, applied);
    }
  });
  return result;
}

}  // namespace

APPENDGUARD_HOOK int fcntl(int fd, int cmd, ...) {
  va_list args;
  va_start(args, cmd);
  void* arg = va_arg(args, void*);
  va_end(args);
  return fcntl_hook("fcntl", fd, cmd, arg, [&](void* a) { return real_fcntl(fd, cmd, a); });
}

APPENDGUARD_HOOK int fcntl64(int fd, int cmd, ...) {
  va_list args;
  va_start(args, cmd);
  void* arg = va_arg(args, void*);
  va_end(args);
  return fcntl_hook("fcntl64", fd, cmd, arg, [&](void* a) { return real_fcntl64(fd, cmd, a); });
}
