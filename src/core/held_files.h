// Held write sessions (write-once stores: rclone --vfs-cache-mode off, mountpoint-s3, gcsfuse,
// appendonlyfs's s3 profile). A file this process created or truncated and then closes is *held*: the
// program's close succeeds, the real descriptor stays open, and a later write open of the same file (same
// device and inode) is answered with that descriptor, so the store sees one upload from the header to the
// last byte. Pure: which session is held, which one goes first when the set is full, and what each event
// does to a held file are plain data and functions, unit-tested without a descriptor (tests/unit).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "core/file_table.h"  // kMaxPath

namespace appendguard {

struct HeldSession {
  int fd = 0;  // the real descriptor, kept open under the number the program closed (all-zero: .bss)
  dev_t device = 0;
  ino_t inode = 0;
  uint64_t end_of_file = 0;  // bytes written in the session (the kernel offset is there)
  int original_flags = 0;    // the first open's flags as the program gave them, for reports
  int effective_flags = 0;   // and as the descriptor was opened
  uint64_t order = 0;        // when it was held: the smallest goes first when the set is full
  pid_t owner = 0;           // the process that opened it: only it may reuse or commit it
  unsigned children = 0;     // how many child processes had been started when it was held
  uint64_t held_at = 0;      // when it was held (CLOCK_MONOTONIC ns): the time limit counts from it
  char path[kMaxPath] = {};
};

// What the program's close of a guarded descriptor does.
struct CloseFacts {
  bool hold_mode = false;            // the file's store is write-once (or APPENDGUARD_REOPEN=hold)
  bool started_session = false;      // this description created or truncated the file
  bool last_descriptor = false;      // the program's last descriptor of the description here
  bool by_owner = false;             // closed by the process that opened it (not a vfork child)
  bool commit_requested = false;     // fsync/fdatasync was called: the program wants it committed
  bool reservation_pending = false;  // a deferred preallocation still to fill (filled at the real close)
};
inline bool holds_on_close(const CloseFacts& f) {
  return f.hold_mode && f.started_session && f.last_descriptor && f.by_owner && !f.commit_requested &&
         !f.reservation_pending;
}

// What an open of a held file does with the session.
enum class HeldOpen {
  kReuse,           // a write open that keeps the bytes: answered with the held descriptor
  kCommitThenOpen,  // a truncating open (starts anew), a read (must see the bytes), or a session a child
                    // process may have ended (children_now differs): commit first, then open as usual
};
HeldOpen on_open_of_held(const HeldSession& s, int flags, unsigned children_now);

// The held sessions of one process: a fixed array, no allocation (hooks may run in signal handlers and
// before constructors). Not thread-safe: the caller holds a lock.
class HeldSet {
 public:
  static constexpr size_t kCapacity = 64;

  constexpr HeldSet() = default;
  // Holds `s` (its `order` is set here). When the set was full the oldest session is moved to `evicted`
  // (the caller commits it) and true is returned.
  bool add(const HeldSession& s, HeldSession& evicted);
  // Removes and returns the session of a file, or of a descriptor number.
  bool take_file(dev_t device, ino_t inode, HeldSession& out);
  bool take_fd(int fd, HeldSession& out);
  bool holds_fd(int fd) const;
  // Removes every session whose descriptor is in [first, last] into `out` (at most `capacity`); returns
  // how many.
  size_t take_range(unsigned first, unsigned last, HeldSession* out, size_t capacity);
  size_t take_all(HeldSession* out, size_t capacity) { return take_range(0, ~0u, out, capacity); }
  // The time limit (APPENDGUARD_HOLD_SECONDS, in nanoseconds here; 0: none): removes the oldest session
  // held at least `limit` before `now` into `out`. next_deadline: when the next one is due, 0 if none.
  bool take_expired(uint64_t now, uint64_t limit, HeldSession& out);
  uint64_t next_deadline(uint64_t limit) const;
  // After fork, in the child: the parent's sessions are not the child's to reuse or commit.
  void forget_all();
  size_t size() const { return count_; }

 private:
  void remove_at(size_t i);
  HeldSession sessions_[kCapacity] = {};
  size_t count_ = 0;
  uint64_t next_order_ = 0;  // zero: the set lives in .bss (packaging.library_size)
};

}  // namespace appendguard
