// Per-thread path buffers for the open path, so that an interposed call needs little stack (issue 24,
// item 6: a write open needed 25-29 KiB of stack, in kMaxPath arrays). A thread's buffers are mapped with
// mmap at its first lease (no malloc: opens run in signal handlers, and before our constructor), reused by
// its later leases, and unmapped when the thread exits. Leases nest LIFO (an open inside a signal handler
// that interrupted one takes the next slots); a nesting deeper than the slots gets a mapping of its own.
// When no memory can be mapped the lease is empty (get() is null): callers treat the path as unresolvable.
#pragma once

#include <cstddef>

#include "core/file_table.h"

namespace appendguard {

constexpr size_t kPathSlots = 8;  // of kMaxPath bytes each: 32 KiB of address space per writing thread

// Creates the key whose destructor unmaps a thread's buffers. Call once, outside signal handlers.
void init_path_scratch();

class PathLease {
 public:
  // `count` consecutive buffers of kMaxPath bytes (count <= kPathSlots).
  explicit PathLease(size_t count);
  ~PathLease();
  PathLease(const PathLease&) = delete;
  PathLease& operator=(const PathLease&) = delete;
  // The i-th buffer of the lease (i < count), or null if memory was exhausted.
  char* get(size_t i = 0) const { return base_ ? base_ + i * kMaxPath : nullptr; }

 private:
  char* base_ = nullptr;
  size_t count_ = 0;
  bool owned_ = false;  // a mapping of its own, unmapped at the end
};

// One path buffer, for OpenDecision::path.
class PathBuffer {
 public:
  PathBuffer() : lease_(1) {}
  char* get() const { return lease_.get(); }

 private:
  PathLease lease_;
};

}  // namespace appendguard
