// The lock of a tracked file for the length of a guarded call, and what the guards share about it.
#pragma once

#include <errno.h>
#include <sys/types.h>

#include "shim/runtime.h"
#include "shim/thread_exit.h"

// The guarded paths are kept out of line so that each hook's untracked path is a few instructions and a
// tail call, with no registers to save.
#define APPENDGUARD_SLOW_PATH __attribute__((noinline))

namespace appendguard {

// The lock of `d`'s file, held for a scope, and `d` pinned for the whole scope (see FileTable::pin), so
// that traces and notes after the lock is released still read this description. The lock is not taken
// when `fd` no longer refers to `d` (a racing close: stale()), nor when this thread already holds it: a
// signal handler that interrupted a guarded call on the same file must not wait for its own thread.
// t_held_file is set before taking the lock and cleared after releasing it, so that a signal in between
// errs on the side of not waiting.
class HeldFile {
 public:
  [[gnu::always_inline]] HeldFile(int fd, Description* d) : d_(d) {
    pinned_ = g_files.pin(d);
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
  // The description's position state, and its update, while the lock is held.
  PositionState snapshot() const { return d_->snapshot(file_); }
  void store(const PositionState& state) { d_->store(file_, state); }
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
    // A thread cancelled inside the call would keep the lock (shim/thread_exit.h).
    if (__builtin_expect(!t_exit_watched, 0)) watch_thread_exit();
    t_held_file = file;
    file->lock.lock();
    if (!g_files.still_refers_to(fd, d)) {  // d is never the closed_by_program() mark
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

// A descriptor closed by another thread while this call was on its way: the close won, as it may.
inline ssize_t fail_on_closed_descriptor() {
  errno = EBADF;
  return -1;
}

}  // namespace appendguard
