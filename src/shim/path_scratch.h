// Per-thread path buffers for the open path, so that an interposed call needs little stack (issue 24,
// item 6: a write open needed 25-29 KiB of stack, in kMaxPath arrays). A thread's buffers are mapped with
// mmap at its first lease (no malloc: opens run in signal handlers, and before our constructor), reused by
// its later leases, and unmapped when the thread exits. Leases nest LIFO (an open inside a signal handler
// that interrupted one takes the next slots); a nesting deeper than the slots gets a mapping of its own.
// When no memory can be mapped the lease is empty (get() is null): callers treat the path as unresolvable.
#pragma once

#include <atomic>
#include <cstddef>

#include "core/file_table.h"
#include "core/hidden.h"

namespace appendguard {

constexpr size_t kPathSlots = 8;  // of kMaxPath bytes each: 32 KiB of address space per writing thread

// This thread's buffers (null until its first lease) and how many slots its live leases hold.
extern APPENDGUARD_HIDDEN
    __attribute__((tls_model("initial-exec"))) constinit thread_local char* t_path_buffers;
extern APPENDGUARD_HIDDEN
    __attribute__((tls_model("initial-exec"))) constinit thread_local size_t t_path_slots_used;

// Creates the key whose destructor unmaps a thread's buffers. Call once, outside signal handlers.
void init_path_scratch();

class PathLease {
 public:
  // `count` consecutive buffers of kMaxPath bytes (count <= kPathSlots).
  explicit PathLease(size_t count) { take(count); }
  // None yet: take() leases them later (OpenDecision's, issue 27). Leases still end in the reverse order
  // of their take().
  PathLease() = default;
  // Leases `count` buffers; once per lease.
  void take(size_t count) {
    count_ = count;
    const size_t used = t_path_slots_used;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    char* const mapped = t_path_buffers;
    if (__builtin_expect(mapped != nullptr && used + count <= kPathSlots, 1)) {  // inline (issue 27)
      base_ = mapped + used * kMaxPath;
      t_path_slots_used = used + count;
      std::atomic_signal_fence(std::memory_order_seq_cst);
      return;
    }
    lease_slowly(used, count);
  }
  ~PathLease() {
    if (__builtin_expect(owned_, 0)) {
      unmap_owned();
    } else if (base_) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
      t_path_slots_used -= count_;
    }
  }
  PathLease(const PathLease&) = delete;
  PathLease& operator=(const PathLease&) = delete;
  // The i-th buffer of the lease (i < count), or null if memory was exhausted.
  char* get(size_t i = 0) const { return base_ ? base_ + i * kMaxPath : nullptr; }

 private:
  char* base_ = nullptr;
  size_t count_ = 0;
  bool owned_ = false;  // a mapping of its own, unmapped at the end
  [[gnu::noinline]] void lease_slowly(size_t used, size_t count);
  [[gnu::noinline]] void unmap_owned();
};

// One path buffer, for OpenDecision::path.
class PathBuffer {
 public:
  PathBuffer() : lease_(1) {}
  char* get() const { return lease_.get(); }

 private:
  PathLease lease_;
};

// One path buffer taken at the first get(), not before (issue 27: a write open of an unmatched name
// needs none). Taken while no lease taken after this object's construction is live, so that leases still
// end in the reverse order of their taking: OpenDecision's is taken within decide_open and its callers.
class LazyPathBuffer {
 public:
  char* get() {
    if (!taken_) {
      taken_ = true;
      lease_.take(1);
    }
    return lease_.get();
  }

 private:
  PathLease lease_;
  bool taken_ = false;
};

}  // namespace appendguard
