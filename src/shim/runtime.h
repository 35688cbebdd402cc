// Process-wide state of the preloaded library: configuration, the file table, and the guard that keeps
// our own I/O (reports, libunwind, fmt, CPython) out of the hooks. All of it is constant-initialized
// and never destroyed, so hooks work before our constructor, during static destruction and after exit.
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>

#include "core/config.h"
#include "core/file_table.h"
#include "core/hidden.h"

namespace appendguard {

enum class RuntimeState : int { kUninitialized, kInitializing, kOff, kEnforce, kAudit };

extern APPENDGUARD_HIDDEN constinit std::atomic<int> g_runtime_state;
extern APPENDGUARD_HIDDEN constinit FileTable g_files;
extern APPENDGUARD_HIDDEN Config* g_config;  // valid once the state is kEnforce or kAudit

// Reads the configuration on the first call (from our constructor or from an earlier hook).
// Returns the mode in force; kOff while this very thread is still initializing.
Mode current_mode_slow();

inline Mode current_mode() {
  int state = g_runtime_state.load(std::memory_order_acquire);
  if (__builtin_expect(state == static_cast<int>(RuntimeState::kOff), 1)) return Mode::kOff;
  if (state == static_cast<int>(RuntimeState::kEnforce)) return Mode::kEnforce;
  if (state == static_cast<int>(RuntimeState::kAudit)) return Mode::kAudit;
  return current_mode_slow();
}

// How deeply this thread is inside our own code. Static TLS: the library is loaded at start-up.
// constinit here too: without it every access from another file tests for a dynamic initializer (a TLS
// wrapper call), on the path of every guarded call.
extern APPENDGUARD_HIDDEN
    __attribute__((tls_model("initial-exec"))) constinit thread_local int t_internal_depth;

// True while this thread runs our own code (reporting, initializing): hooks then pass straight through.
struct InternalScope {
  InternalScope() { ++t_internal_depth; }
  ~InternalScope() { --t_internal_depth; }
  InternalScope(const InternalScope&) = delete;
  InternalScope& operator=(const InternalScope&) = delete;
  static bool active() { return t_internal_depth > 0; }
};

// The description behind `fd` if we guard it; null on the fast path. Our own code never calls a hook on a
// guarded descriptor (it uses the real_ functions), so a hook reached inside our code on one is a signal
// handler that interrupted us: it is checked like any other call.
inline Description* tracked_description(int fd) {
  return g_files.lookup(fd);
}

// Set at start-up: glibc's getpid() is the bare system call from 2.25 on; before, it answered from a pid
// cached in the thread, stale in a child made by a raw clone.
extern APPENDGUARD_HIDDEN constinit bool g_getpid_is_the_system_call;
// The pid of the process that owns the file table (set at start-up and in a fork child).
extern APPENDGUARD_HIDDEN constinit std::atomic<pid_t> g_owner_pid;
// getpid(2) through libc's syscall() (glibc before 2.25), never our hook of syscall().
pid_t getpid_by_libc_syscall();

// getpid(2) through libc (its getpid() where that is the bare system call, glibc 2.25+, else its
// syscall()), never our hook of syscall(). Inline, as the two below: the owner check is made on every
// guarded open and close (issue 27: a call of its own each).
inline pid_t raw_getpid() {
  if (__builtin_expect(g_getpid_is_the_system_call, 1)) return ::getpid();
  return getpid_by_libc_syscall();
}
// False in a vfork()ed child (or a raw clone), which shares our memory with the parent: such a child
// must not change the parent's file table when it closes or duplicates descriptors before exec.
inline bool owns_file_table() {
  return raw_getpid() == g_owner_pid.load(std::memory_order_relaxed);
}
// The same with the process's id: this process's pid if it owns the table, else 0 (one getpid for both).
inline pid_t file_table_owner_pid() {
  const pid_t self = raw_getpid();
  return self == g_owner_pid.load(std::memory_order_relaxed) ? self : 0;
}

// At start-up: the settings that decide which descriptors are guarded (APPENDGUARD_PATHS, APPENDGUARD_FS),
// so that an exec under the same settings tells the new program that the descriptors it carries are all
// the guarded ones (shim/hooks_exec.cpp).
void remember_guarding_settings();
// In the parent before a fork: the libc functions an exec in the child calls are resolved here once,
// instead of by a dlsym in every child (issue 27: ~20 page faults of each fork + exec).
void resolve_exec_functions();

// The handlers registered with pthread_atfork, run around a fork made by a raw system call
// (syscall_dispatch.cpp), which libc's fork handlers do not see.
void run_fork_prepare();
void run_fork_parent();
void run_fork_child();

// A notice said once per process: first_time() is true once in each process (a fork child says it
// again, for its own log).
class OncePerProcess {
 public:
  bool first_time() { return first_time_in(static_cast<pid_t>(syscall(SYS_getpid))); }
  // The same where the caller has this process's pid already.
  bool first_time_in(pid_t pid) { return told_.exchange(pid, std::memory_order_relaxed) != pid; }

 private:
  std::atomic<pid_t> told_{0};
};

}  // namespace appendguard
