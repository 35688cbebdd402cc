// A Lock taken with every signal blocked: a signal handler may open, close or rename a guarded file, and
// must never wait for a lock that the thread it interrupted holds. The mask is set through libc's
// syscall() itself, not our hook of it.
#pragma once

#include <signal.h>
#include <sys/syscall.h>

#include "core/lock.h"
#include "shim/real_io.h"

namespace appendguard {

class SignalsBlockedLock {
 public:
  explicit SignalsBlockedLock(Lock& lock) : lock_(lock) {
    sigset_t all;
    sigfillset(&all);
    real_syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old_, _NSIG / 8);
    lock_.lock();
  }
  ~SignalsBlockedLock() {
    lock_.unlock();
    real_syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old_, nullptr, _NSIG / 8);
  }
  SignalsBlockedLock(const SignalsBlockedLock&) = delete;
  SignalsBlockedLock& operator=(const SignalsBlockedLock&) = delete;

 private:
  Lock& lock_;
  sigset_t old_;
};

}  // namespace appendguard
