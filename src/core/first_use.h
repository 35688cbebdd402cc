// Start-up work done at its first use instead (issue 27: every new process paid for reading the mount
// table, ~90 us of a fork + exec of /bin/true, though most programs never open a file for writing).
// `run` performs the work once, in the first thread that asks after `arm`; the others wait until it is
// done. The work must not be re-entered from its own thread (run it with signals blocked).
#pragma once

#include <sched.h>

#include <atomic>

namespace appendguard {

class FirstUse {
 public:
  constexpr FirstUse() = default;

  // The work is pending from now on (before, run() has nothing to do).
  void arm() { state_.store(kPending, std::memory_order_release); }
  bool pending() const { return state_.load(std::memory_order_acquire) != kDone; }

  // Returns once the work is done (by this call or another thread's).
  template <typename Work>
  void run(Work&& work) {
    for (;;) {
      int state = state_.load(std::memory_order_acquire);
      if (state == kDone) return;
      if (state == kPending && state_.compare_exchange_strong(state, kRunning, std::memory_order_acq_rel,
                                                              std::memory_order_acquire)) {
        work();
        state_.store(kDone, std::memory_order_release);
        return;
      }
      if (state == kRunning) sched_yield();
    }
  }

  // In a fork child: a run that another thread of the parent was making never finishes there; the
  // child's first use makes it again.
  // Read first: a compare-exchange writes even when it fails, which copies the page in every fork child.
  void reset_after_fork() {
    int running = kRunning;
    if (state_.load(std::memory_order_relaxed) == kRunning)
      state_.compare_exchange_strong(running, kPending, std::memory_order_acq_rel);
  }

 private:
  enum : int { kDone, kPending, kRunning };  // kDone first: a constinit object has nothing to do
  std::atomic<int> state_{kDone};
};

}  // namespace appendguard
