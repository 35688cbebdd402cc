#include "shim/thread_exit.h"

#include <dlfcn.h>
#include <pthread.h>

#include "core/file_table.h"
#include "shim/hook.h"
#include "shim/real_io.h"

namespace appendguard {

void (*g_testcancel)() = nullptr;  // zero-initialized: a constant
constinit std::atomic<bool> g_cancel_requested{false};

__attribute__((tls_model("initial-exec"))) constinit thread_local bool t_exit_watched = false;

namespace {

pthread_key_t g_key;
bool g_key_made = false;
int (*g_setspecific)(pthread_key_t, const void*) = nullptr;

// After the thread's unwinding: t_held_file is set only while this thread holds that file's lock
// (shim/held_file.h), so it is released here; a thread that ends normally holds none. Only the innermost
// file is known: a cancelled signal handler's call on a second file leaves the interrupted call's lock taken.
void thread_exits(void*) {
  TrackedFile* file = t_held_file;
  if (!file) return;
  t_held_file = nullptr;
  file->lock.unlock();
}

}  // namespace

void init_thread_exit() {
  if (g_key_made) return;
  using KeyCreate = int (*)(pthread_key_t*, void (*)(void*));
  auto key_create = reinterpret_cast<KeyCreate>(dlsym(RTLD_DEFAULT, "pthread_key_create"));
  g_setspecific = reinterpret_cast<decltype(g_setspecific)>(dlsym(RTLD_DEFAULT, "pthread_setspecific"));
  g_testcancel = reinterpret_cast<decltype(g_testcancel)>(dlsym(RTLD_DEFAULT, "pthread_testcancel"));
  g_key_made = key_create && g_setspecific && key_create(&g_key, thread_exits) == 0;
}

void watch_thread_exit() {
  t_exit_watched = true;
  // Any non-null value: glibc calls a key's destructor only for a thread whose value is set.
  static const char kWatched = 1;
  if (g_key_made) g_setspecific(g_key, &kWatched);
}

}  // namespace appendguard

// Only noted, then made: a cancellation requested here can be pending at a later guarded close
// (act_on_pending_cancellation).
APPENDGUARD_HOOK int pthread_cancel(pthread_t thread) {
  appendguard::g_cancel_requested.store(true, std::memory_order_relaxed);
  return appendguard::real_pthread_cancel(thread);
}
