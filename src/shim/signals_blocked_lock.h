// Every signal blocked for a scope, and a Lock taken that way: a signal handler may open, close or rename
// a guarded file, and must never wait for a lock that the thread it interrupted holds (nor run where the
// program's handlers must not: a child sharing our memory, the library's own threads). The mask is set
// through libc's syscall() itself, not our hook of it.
#pragma once

#include <signal.h>
#include <sys/syscall.h>

#include "core/lock.h"
#include "shim/real_io.h"

namespace appendguard {

// Blocks every signal (sigfillset's: glibc's internal ones stay as they were) and restores the thread's
// mask at the end of the scope. A thread or clone child started inside inherits the blocked mask.
class AllSignalsBlocked {
 public:
  AllSignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    real_syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old_, _NSIG / 8);
  }
  ~AllSignalsBlocked() { real_syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old_, nullptr, _NSIG / 8); }
  AllSignalsBlocked(const AllSignalsBlocked&) = delete;
  AllSignalsBlocked& operator=(const AllSignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

class SignalsBlockedLock {
 public:
  explicit SignalsBlockedLock(Lock& lock) : lock_(lock) { lock_.lock(); }
  ~SignalsBlockedLock() { lock_.unlock(); }
  SignalsBlockedLock(const SignalsBlockedLock&) = delete;
  SignalsBlockedLock& operator=(const SignalsBlockedLock&) = delete;

 private:
  AllSignalsBlocked blocked_;  // first: signals are blocked before the lock is taken, restored after it
  Lock& lock_;
};

}  // namespace appendguard
