// A thread's id, asked of the kernel once per thread and process rather than at every guarded open
// (issue 27: gettid through libc's syscall() on every open). Kept per thread (thread_local) with the
// process id it was asked in: a fork child's thread (another process) asks again, since the pid the
// caller gives then differs; the fork handler also forgets it in the child (a pid reused by a descendant
// must not find its ancestor's id). Callers give the pid of a process that owns the file table
// (shim/runtime.h): a vfork child, which shares the parent's memory and thread-local storage, never
// reaches it, and so never writes its own id into the parent's thread. A thread made by a raw clone
// without its own thread-local storage reads its creator's id: glibc's own per-thread state (errno, the
// thread's id in its descriptor) is its creator's there too.
//
// Async-signal-safe: a handler interrupting the fill on the same thread asks the kernel itself and writes
// the same id (one thread, one id); the id is written before the pid that makes it valid.
#pragma once

#include <sys/types.h>

#include <atomic>

namespace appendguard {

struct ThreadIdCache {
  pid_t pid = 0;  // the process `tid` was asked in; 0: not asked
  pid_t tid = 0;

  template <typename AskKernel>
  pid_t get(pid_t process, AskKernel ask) {
    if (__builtin_expect(pid == process, 1)) return tid;
    const pid_t asked = ask();
    tid = asked;
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the id before the pid that validates it
    pid = process;
    return asked;
  }
  void forget() { pid = 0; }
};

}  // namespace appendguard
