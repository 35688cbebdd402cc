// The guarded operations behind the hooks: each hook finds out whether its descriptor or path is ours
// and, if so, hands over to one of these. Nothing here runs for files we do not guard.
#pragma once

#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>
#include <initializer_list>

#include "core/carried_fds.h"
#include "core/eof_rule.h"
#include "core/file_table.h"
#include "report/report.h"
#include "shim/runtime.h"

namespace appendguard {

// ---------------------------------------------------------------- opening
struct OpenRequest {
  const char* function;  // libc name, for reports
  int dirfd;             // AT_FDCWD unless openat
  const char* path;
  int flags;
};

struct OpenDecision {
  bool guarded = false;           // track the descriptor the real call returns
  bool trace_only = false;        // matched, but read-only: shown in trace mode, not tracked
  bool existed = false;           // audit mode: the file was there before the open
  bool rewrite_existing = false;  // APPENDGUARD_REOPEN=rewrite: truncate and write the old bytes back
  bool exists = false;            // the file was there at the decision
  bool hold = false;              // sessions started by this open are held (shim/held_sessions.h)
  int reuse_fd = -1;              // a held session answers this open: its descriptor
  uint64_t reuse_end = 0;         // and the bytes written in it
  uint64_t written_back = 0;      // rewrite: the existing bytes read and written back after truncating
  int flags = 0;                  // what to pass to the real call
  char path[kMaxPath];            // absolute, normalized
};

// Fills `decision` for an open in the current mode. Cheap for every open we leave alone.
void decide_open(const OpenRequest& request, OpenDecision& decision);
// Called with the real call's result; returns what the hook returns.
int finish_open(const OpenRequest& request, const OpenDecision& decision, int fd);
// Opens as decided with `call(flags)` (the real libc call), then finish_open. Defined in
// guard_templates.h.
template <typename Call>
int open_as_decided(const OpenRequest& request, OpenDecision& decision, Call&& call);
// A descriptor we did not open (inherited across exec, received over a socket), tracked if it is open
// for writing on a regular file that is guarded (by pattern or mount) or that a carried record describes
// (core/carried_fds.h): with what that record says the program asked for, else with what the kernel
// shows. Returns true if it was adopted.
bool adopt_if_guarded(int fd, const char* function, const CarriedFd* carried, size_t carried_count);
void adopt_received_descriptors(const char* operation, const msghdr* message);

// ---------------------------------------------------------------- violations
// A violation on `fd` (tracked as `d`) with no byte count and no offset; callers add what applies.
Violation violation_on(const char* operation, int fd, const Description* d, uint64_t end_of_file,
                       const char* why);
// Reports `v` and applies APPENDGUARD_ON_VIOLATION. Returns true if the call must go on (warn, audit),
// false if the hook must fail it (errno is then set).
bool handle_violation(Violation& v);

// ---------------------------------------------------------------- writing
// Runs the end-of-file rule for a write-family call on `fd`, tracked as `d`, then `perform()`s it.
template <typename Perform>
ssize_t guarded_write(const char* operation, int fd, Description* d, const WriteRequest& request,
                      Perform&& perform);

// The kernel refuses sendfile, copy_file_range and splice into an O_APPEND descriptor; in enforce mode
// those are carried out as reads and checked writes. `in_offset` may be null (the input's own position
// is used and left just after the bytes written); `out_offset` null means the output position.
ssize_t copy_by_write(int in_fd, off64_t* in_offset, int out_fd, off64_t* out_offset, size_t count);

// ---------------------------------------------------------------- everything else on a tracked fd
template <typename RealSeek>
off64_t guarded_seek(const char* operation, int fd, Description* d, off64_t offset, int whence,
                     RealSeek&& real_seek);
void note_duplicate(const char* operation, int old_fd, int new_fd);
void note_close(int fd);
// A guarded call failed with `error`: on a descriptor whose open appendguard changed, a store's refusal
// is explained once (the program did not ask for those flags). Leaves errno = error.
void note_failed_guarded_call(const char* operation, int fd, Description* d, int error);
// close() of a tracked descriptor: forget it, close it, trace the real result.
int close_tracked(int fd);
// Deferred preallocation (deferred_prealloc.cpp): before the last descriptor of a file closes, and at
// exit, append the zeros the program was promised and did not write.
void fill_reservation_before_close(int fd, Description* d);
void fill_reservations_at_exit();
// `size` (from the kernel), or the promised size of a deferred preallocation if larger.
off64_t size_seen_by_program(int fd, off64_t size);
// A descriptor number the kernel just handed out for something we do not guard: if we still track that
// number, it was closed behind our back (a raw syscall, glibc closing internally) and is forgotten.
inline int forget_if_stale(int fd) {
  if (__builtin_expect(g_files.lookup(fd) != nullptr, 0)) note_close(fd);
  return fd;
}
void note_close_range(const char* operation, unsigned first, unsigned last);
// F_SETFL: O_APPEND cannot be cleared on a descriptor we made append-only. Returns the flags to set.
int setfl_flags(Description* d, int requested);
void note_setfl(int fd, Description* d, int requested, int applied, int result);

// ftruncate/fallocate on a tracked fd: allowed when it leaves the size as it is.
struct Resize {
  off64_t offset = 0;          // fallocate's offset; 0 for truncation
  off64_t length = 0;          // the new size (truncate) or the range length (fallocate)
  int fallocate_mode = -1;     // -1: a truncation
  bool returns_error = false;  // posix_fallocate: returns an errno value instead of -1
};
template <typename Perform>
int guarded_resize(const char* operation, int fd, Description* d, const Resize& resize, Perform&& perform);
// truncate(path) on a guarded path. `full_path` from guarded_path().
bool guarded_path(const char* path, char* full_path);
bool guarded_path_at(int dirfd, const char* path, char* full_path);
template <typename Perform>
int guarded_truncate(const char* operation, const char* full_path, off64_t length, Perform&& perform);

void note_read(const char* operation, int fd, Description* d, bool moves_position, ssize_t result, int error);
void note_mmap(const char* operation, int fd, Description* d, int prot, int flags, bool failed, int error);

inline bool tracing() {
  return g_config->trace;
}  // only called once the library is enabled
void trace(const char* operation, int fd, const char* path, long long result, int error, const char* format,
           ...) __attribute__((format(printf, 6, 7)));
// The same with a detail of numbers ("bytes=64 offset=0 ...", then `suffix`): for write and seek lines,
// without printf (src/shim/trace.cpp).
void trace_numbers(const char* operation, int fd, const char* path, long long result, int error,
                   std::initializer_list<TraceNumber> numbers, const char* suffix = "");
inline TraceNumber trace_unsigned(const char* name, unsigned long long value) {
  return {name, value, false};
}
inline TraceNumber trace_signed(const char* name, long long value) {
  return {name, static_cast<unsigned long long>(value), true};
}

// The path the kernel has for `fd` (readlink of /proc/self/fd/N), NUL-terminated.
bool descriptor_path(int fd, char* out, size_t capacity);
// `path` made absolute against `dirfd` (AT_FDCWD: the working directory) and normalized, into `out`
// (kMaxPath bytes).
bool resolve_full_path(int dirfd, const char* path, char* out);

// The lock of `d`'s file, held for a scope, and `d` pinned for the whole scope (see FileTable::pin), so
// that traces and notes after the lock is released still read this description. The lock is not taken
// when `fd` no longer refers to `d` (a racing close: stale()), nor when this thread already holds it: a
// signal handler that interrupted a guarded call on the same file must not wait for its own thread.
// t_held_file is set before taking the lock and cleared after releasing it, so that a signal in between
// errs on the side of not waiting.
class HeldFile {
 public:
  HeldFile(int fd, Description* d) : d_(d) {
    pinned_ = g_files.pin(fd, d);
    if (pinned_) reacquire(fd, d);
  }
  ~HeldFile() {
    release();
    if (pinned_) g_files.unpin(d_);
  }
  HeldFile(const HeldFile&) = delete;
  HeldFile& operator=(const HeldFile&) = delete;

  explicit operator bool() const { return file_ != nullptr; }
  TrackedFile* operator->() const { return file_; }
  // The lock was not taken because this thread holds it (see above).
  bool held_by_interrupted_call() const { return interrupted_call_; }
  // The descriptor was closed (or replaced) by another thread since the hook looked it up.
  bool stale() const { return !pinned_ || (!file_ && !interrupted_call_); }
  // Takes the lock again after release().
  void reacquire(int fd, Description* d) {
    if (!pinned_) return;
    TrackedFile* file = d->file;
    if (t_held_file == file) {
      interrupted_call_ = true;
      return;
    }
    previous_ = t_held_file;
    t_held_file = file;
    file->lock.lock();
    if (g_files.lookup(fd) != d) {
      file->lock.unlock();
      t_held_file = previous_;
      return;
    }
    file_ = file;
  }
  void release() {
    if (!file_) return;
    file_->lock.unlock();
    t_held_file = previous_;
    file_ = nullptr;
  }

 private:
  Description* d_;
  TrackedFile* file_ = nullptr;
  TrackedFile* previous_ = nullptr;
  bool pinned_ = false;
  bool interrupted_call_ = false;
};

}  // namespace appendguard

#include "shim/guard_templates.h"
