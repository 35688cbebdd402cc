// A futex mutex with a constant initializer and a reset for the child of fork(): glibc's mutexes may be
// left locked by threads that do not exist in the child, and re-initializing them is undefined.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

namespace appendguard {

class Lock {
 public:
  constexpr Lock() = default;
  void lock() {
    int expected = 0;
    if (state_.compare_exchange_strong(expected, 1, std::memory_order_acquire)) return;
    if (expected != 2) expected = state_.exchange(2, std::memory_order_acquire);
    while (expected != 0) {
      syscall(SYS_futex, &state_, FUTEX_WAIT_PRIVATE, 2, nullptr, nullptr, 0);
      expected = state_.exchange(2, std::memory_order_acquire);
    }
  }
  void unlock() {
    if (state_.exchange(0, std::memory_order_release) == 2) {
      syscall(SYS_futex, &state_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    }
  }
  void reset_in_child() { state_.store(0, std::memory_order_relaxed); }

 private:
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
