// A futex mutex with a constant initializer and a reset for the child of fork(): glibc's mutexes may be
// left locked by threads that do not exist in the child, and re-initializing them is undefined.
// While the process has one thread, taking and releasing it are one cmpxchg each without the lock prefix
// (core/single_thread.h); released after a thread was created meanwhile, it is released as usual.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "core/single_thread.h"

namespace appendguard {

class Lock {
 public:
  constexpr Lock() = default;
  void lock() {
    int expected = 0;
    const bool taken = single_thread::process_has_one_thread()
                           ? single_thread::compare_exchange_unlocked(state_, expected, 1)
                           : state_.compare_exchange_strong(expected, 1, std::memory_order_acquire);
    if (__builtin_expect(!taken, 0)) wait(expected);
  }
  void unlock() {
    // With one thread nobody waits (a waiter is another thread: created since, this reads false).
    int held = 1;
    if (single_thread::process_has_one_thread() && single_thread::compare_exchange_unlocked(state_, held, 0))
      return;
    if (state_.exchange(0, std::memory_order_release) == 2) wake();
  }
  void reset_in_child() { state_.store(0, std::memory_order_relaxed); }

 private:
  // Out of line: the hooks inline lock() and unlock(), and only these two make system calls.
  [[gnu::noinline]] void wait(int seen) {
    if (seen != 2) seen = state_.exchange(2, std::memory_order_acquire);
    while (seen != 0) {
      syscall(SYS_futex, &state_, FUTEX_WAIT_PRIVATE, 2, nullptr, nullptr, 0);
      seen = state_.exchange(2, std::memory_order_acquire);
    }
  }
  [[gnu::noinline]] void wake() { syscall(SYS_futex, &state_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0); }

  std::atomic<int> state_{0};
};

class LockGuard {
 public:
  explicit LockGuard(Lock& lock) : lock_(lock) { lock_.lock(); }
  ~LockGuard() { lock_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  Lock& lock_;
};

}  // namespace appendguard
