// A thread that ends inside a guarded call: pthread_cancel acted on in the real write (a cancellation
// point), or pthread_exit from a signal handler that interrupted one. Its unwinding runs no destructor of
// ours (the library is built without exceptions), so the file lock its HeldFile took would stay taken and
// the next call on that file, in any thread, would wait forever. The thread's exit releases it instead:
// a pthread key's destructor, which glibc runs after the cancellation's unwinding, unlocks the file in
// t_held_file. The key's value is set at the thread's first guarded call (one thread-local test per call).
#pragma once

#include <atomic>

#include "core/hidden.h"

namespace appendguard {

extern APPENDGUARD_HIDDEN
    __attribute__((tls_model("initial-exec"))) constinit thread_local bool t_exit_watched;

// At start-up: the key.
void init_thread_exit();
// At a thread's first guarded call: its exit will look at t_held_file.
[[gnu::cold, gnu::noinline]] void watch_thread_exit();
// pthread_testcancel: acts on a cancellation pending for this thread. Resolved at start-up (before glibc
// 2.34 it is libpthread's, which a program without threads does not load: then nothing can be pending).
// Called only once the process has asked for a cancellation (our pthread_cancel hook sets
// g_cancel_requested): every guarded close asks, and a process that never cancels pays one load (issue 27's
// cycle: the call was about 10 instructions).
extern APPENDGUARD_HIDDEN void (*g_testcancel)();
extern APPENDGUARD_HIDDEN std::atomic<bool> g_cancel_requested;
inline void act_on_pending_cancellation() {
  if (__builtin_expect(g_cancel_requested.load(std::memory_order_relaxed), 0) && g_testcancel) g_testcancel();
}

}  // namespace appendguard
