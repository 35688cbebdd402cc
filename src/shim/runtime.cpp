#include "shim/runtime.h"

#include <dirent.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "compat/stat_compat.h"
#include "core/carried_fds.h"
#include "core/path.h"
#include "core/pattern_check.h"
#include "core/syscall_dispatch_policy.h"
#include "core/variables.h"
#include "report/report.h"
#include "report/summary.h"
#include "shim/guard_open.h"
#include "shim/guard_size.h"
#include "shim/held_sessions.h"
#include "shim/mount_guard.h"
#include "shim/path_scratch.h"
#include "shim/real_io.h"
#include "shim/spool.h"
#include "shim/syscall_dispatch.h"
#include "shim/thread_exit.h"

namespace appendguard {

// The owner check's pid, asked of the kernel on every guarded open and close (twice each): through
// libc's getpid() where it is the system call itself (a dozen instructions fewer than libc's syscall()),
// else through libc's syscall(), never our hook of it (runtime.h raw_getpid).
constinit bool g_getpid_is_the_system_call = false;
constinit std::atomic<pid_t> g_owner_pid{0};

pid_t getpid_by_libc_syscall() {
  return static_cast<pid_t>(real_syscall(SYS_getpid));
}

constinit std::atomic<int> g_runtime_state{static_cast<int>(RuntimeState::kUninitialized)};
constinit FileTable g_files;
Config* g_config = nullptr;
__attribute__((tls_model("initial-exec"))) constinit thread_local int t_internal_depth = 0;

namespace {

void before_fork() {
  resolve_exec_functions();
  g_files.before_fork();
}
void after_fork_parent() {
  g_files.after_fork_parent();
  note_child_started();
}
void after_fork_child() {
  g_files.after_fork_child();
  forget_held_after_fork_child();
  forget_thread_id_after_fork_child();
  reset_reporter_after_fork();
  g_summary.~SummaryCounters();  // the child's summary counts its own calls
  new (&g_summary) SummaryCounters();
  g_owner_pid.store(raw_getpid(), std::memory_order_relaxed);
  reset_mount_reading_after_fork();
  // Locks another thread of the parent may have held at the fork (third adversarial round).
  reset_exclusive_after_fork_child();
  reset_spool_after_fork_child();
  reset_mount_refresh_after_fork_child();
  arm_syscall_dispatch_in_this_thread();  // not inherited by a child
}

// Descriptors inherited across exec are not in our (new) table; guarded ones are taken in with what the
// process before exec knew of them (carried in the environment, core/carried_fds.h), else as they are.
// `text`: the carried value, null when there is none (or secure mode, which reads none but still unsets it).
void adopt_inherited_descriptors(const char* text, pid_t pid, bool secure) {
  size_t capacity = count_carried_records(text);
  // Freed at the end of the adoption; as many records as the exec'ing process carried (no cap).
  CarriedFd* carried = capacity ? new (std::nothrow) CarriedFd[capacity] : nullptr;
  bool complete = false;
  // No value, nothing to parse: no getppid (issue 27: every new process's start-up).
  size_t carried_count = !text || (capacity && !carried)
                             ? 0
                             : parse_carried_fds(text, pid, static_cast<pid_t>(syscall(SYS_getppid)), carried,
                                                 capacity, &complete);
  // The program's environment stays as it was given (secure mode too; no value: nothing to unset).
  if (text || secure) unsetenv(kCarriedFdsVariable);
  if (complete) {
    // The records are every guarded descriptor inherited (core/carried_fds.h, CarrierReader::complete):
    // the work is the records', not every inherited descriptor's (issue 27).
    for (size_t i = 0; i < carried_count; ++i) {
      adopt_if_guarded(carried[i].fd, "(inherited)", carried, carried_count);
    }
    delete[] carried;
    return;
  }
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) {
    delete[] carried;
    return;
  }
  int self = dirfd(dir);
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    long number = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || number == self) continue;
    adopt_if_guarded(static_cast<int>(number), "(inherited)", carried, carried_count);
  }
  closedir(dir);
  delete[] carried;
}

// By system call: stat is in libc only since glibc 2.33 (before, an inline wrapper of __xstat).
bool is_directory(const char* path) {
  struct stat st;
  return syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) == 0 && S_ISDIR(st.st_mode);
}

// A directory's name with its symlinks resolved (realpath), for APPENDGUARD_PATHS patterns.
bool physical_directory(const std::string& directory, std::string& out) {
  char* resolved = realpath(directory.c_str(), nullptr);
  if (!resolved) return false;
  out = resolved;
  std::free(resolved);
  return true;
}

// The environment's APPENDGUARD* entries, gathered once at start-up (secure mode: none, as secure_getenv).
constinit OurEnvironment g_start_environment;

const char* start_getenv(const char* name) {
  return g_start_environment.overflow ? secure_getenv(name) : g_start_environment.value_of(name);
}

void initialize() {
  InternalScope internal;
  const bool secure = getauxval(AT_SECURE) != 0;
  g_start_environment.gather(secure ? nullptr : environ);  // secure mode reads nothing
  ConfigResult result = parse_config(start_getenv, secure ? nullptr : environ);
  if (!result.ok()) {
    std::string line = result.error + "\n";
    syscall(SYS_write, STDERR_FILENO, line.data(), line.size());
    _exit(2);  // a typo must never leave a job silently unguarded
  }
  if (result.config.mode != Mode::kOff) {
    const char* paths = start_getenv("APPENDGUARD_PATHS");
    for (std::string& notice : pattern_notices(paths ? paths : "", is_directory)) {
      result.notices.push_back(std::move(notice));
    }
  }
  for (const std::string& notice : result.notices) {
    std::string line = notice + "\n";
    syscall(SYS_write, STDERR_FILENO, line.data(), line.size());
  }
  if (result.config.mode == Mode::kOff) {
    g_runtime_state.store(static_cast<int>(RuntimeState::kOff), std::memory_order_release);
    return;
  }
  g_config = new Config(std::move(result.config));
  if (g_config->mode == Mode::kEnforce) refuse_spool_on_a_store();
  g_config->paths.add_physical_aliases(physical_directory);  // one rule for every path form (path.h)
  configure_reporter(*g_config);
  set_unwinder_loading_check(owns_file_table);  // a vfork child does not load libunwind for its parent
  init_path_scratch();
  init_thread_exit();
  g_getpid_is_the_system_call = libc_version_at_least(gnu_get_libc_version(), 2, 25);
  const pid_t self = raw_getpid();
  g_owner_pid.store(self, std::memory_order_relaxed);
  FileTable::use_system_call(real_syscall.get());  // the registry's signal masks: libc's, not our hook
  compat::use_libc_syscall(real_syscall.get());    // fstatat64 and the fstat fallbacks likewise
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  read_mount_table_at_first_use();  // not now: most programs never need it (issue 27)
  remember_guarding_settings();
  adopt_inherited_descriptors(start_getenv(kCarriedFdsVariable), self, secure);
  // Registered before the handlers below, so it runs after them: after the reservations are filled.
  if (g_config->summary) enable_summary_at_exit([] { return g_files.write_totals(); });
  // Registered after the summary, before the handlers that trace: runs after them and before the summary.
  if (g_config->trace) atexit(flush_traces_at_exit);
  atexit(fill_reservations_at_exit);
  atexit(commit_held_at_exit);
  atexit(upload_spooled_at_exit);  // before the held commits (atexit runs last-registered first)
  RuntimeState state = g_config->mode == Mode::kEnforce ? RuntimeState::kEnforce : RuntimeState::kAudit;
  g_runtime_state.store(static_cast<int>(state), std::memory_order_release);
  start_syscall_dispatch(*g_config);
}

__attribute__((constructor)) void initialize_at_load() {
  current_mode();
}

}  // namespace

Mode current_mode_slow() {
  int expected = static_cast<int>(RuntimeState::kUninitialized);
  if (g_runtime_state.compare_exchange_strong(expected, static_cast<int>(RuntimeState::kInitializing),
                                              std::memory_order_acq_rel)) {
    initialize();
    return current_mode();
  }
  if (expected == static_cast<int>(RuntimeState::kInitializing)) {
    if (InternalScope::active()) return Mode::kOff;  // our own initialization calling a hook
    while (g_runtime_state.load(std::memory_order_acquire) == static_cast<int>(RuntimeState::kInitializing)) {
      sched_yield();
    }
  }
  return current_mode();
}

void run_fork_prepare() {
  before_fork();
}
void run_fork_parent() {
  after_fork_parent();
}
void run_fork_child() {
  after_fork_child();
}

}  // namespace appendguard
