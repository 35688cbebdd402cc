// exec and spawn: the new program inherits our descriptors but not our table. Guarded descriptors that
// stay open across exec are described in one environment variable (core/carried_fds.h) that the
// library reads back in the new program, so that a descriptor whose O_RDWR we rewrote into an append
// keeps what the program asked for and where it was. Nothing happens when no descriptor is tracked.
// system() and popen() spawn with glibc's internal calls: they carry nothing (hooks_spawn.cpp).
#include <fcntl.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/carried_fds.h"
#include "report/report.h"
#include "shim/exec_check.h"
#include "shim/guard_descriptor.h"
#include "shim/held_sessions.h"
#include "shim/hook.h"
#include "shim/trace.h"

extern char** environ;

using namespace appendguard;

namespace {

// The settings that decide which descriptors are guarded, as this process read them at start-up, and as
// an exec passes them on: when they are the same, the records of an exact exec are every guarded
// descriptor the new program holds (CarrierReader::complete). FNV-1a over the two values, an unset one
// told apart from an empty one.
constexpr const char* kGuardingVariables[] = {"APPENDGUARD_PATHS", "APPENDGUARD_FS"};
constinit uint64_t g_guarding_settings = 0;

uint64_t mix(uint64_t hash, const char* text, bool with_terminator) {
  for (const char* c = text; *c; ++c) hash = (hash ^ static_cast<unsigned char>(*c)) * 0x100000001b3ULL;
  return with_terminator ? (hash ^ 0xffU) * 0x100000001b3ULL : hash;
}

template <typename Lookup>
uint64_t guarding_settings(Lookup&& lookup) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char* name : kGuardingVariables) {
    const char* value = lookup(name);
    hash = mix(hash, value ? "set:" : "unset", true);
    if (value) hash = mix(hash, value, true);
  }
  return hash;
}

uint64_t guarding_settings_in(char* const* envp, size_t entries) {
  return guarding_settings([&](const char* name) -> const char* {
    const size_t n = std::strlen(name);
    for (size_t i = 0; i < entries; ++i) {
      if (std::strncmp(envp[i], name, n) == 0 && envp[i][n] == '=') return envp[i] + n + 1;
    }
    return nullptr;
  });
}

// Which tracked descriptors the new program may hold. `exact`: the table knows every descriptor of this
// process (an exec by the process itself: its dup2s are in the table), so exactly those that survive the
// exec are carried, close-on-exec ones skipped. Otherwise (a spawn, whose file actions dup2 our
// descriptors where no hook sees it, or an exec in a vfork child, whose dup2 onto stdout is not in the
// table: Python's subprocess) close-on-exec ones are carried too, for the new program to find a copy's
// record by file. No cap (issue 24: 128 records, lowest numbers first, dropped the descriptor that was
// really inherited when 128 close-on-exec ones came before it). Reads the table without locks: this may
// run in a vfork child, which must not wait for a lock a thread of its parent holds.
template <typename Each>
void for_each_carried(bool exact, Each&& each) {
  if (exact) return for_each_tracked_by_close_on_exec(false, each);
  int highest = g_files.highest_fd();
  for (int fd = g_files.next_slot(0, highest); fd <= highest; fd = g_files.next_slot(fd + 1, highest)) {
    if (Description* d = g_files.lookup(fd)) each(fd, d);
  }
}

// Memory for the new environment, the records and the variable, from the kernel: this may run in a vfork
// child (no malloc), and the stack of a small thread cannot hold thousands of pointers or records.
class CarrierMemory {
 public:
  explicit CarrierMemory(size_t bytes) : bytes_(bytes) {
    void* p = reinterpret_cast<void*>(
        syscall(SYS_mmap, nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    memory_ = p == MAP_FAILED ? nullptr : p;
  }
  ~CarrierMemory() {
    if (memory_) syscall(SYS_munmap, memory_, bytes_);
  }
  CarrierMemory(const CarrierMemory&) = delete;
  CarrierMemory& operator=(const CarrierMemory&) = delete;
  void* get() const { return memory_; }

 private:
  size_t bytes_;
  void* memory_;
};

// One line when the records cannot be carried (no memory): the new program adopts those descriptors as
// the kernel shows them.
void say_not_carried(const char* operation, size_t count) {
  char message[400];
  std::snprintf(
      message, sizeof message,
      "%s: no memory to carry the %zu guarded descriptors to the new program: it adopts them as the "
      "kernel shows them (a rewritten O_RDWR looks like O_APPEND, and its writes at the position "
      "append instead of being refused)",
      operation, count);
  report_notice(message);
}

bool is_carrier(const char* entry) {
  size_t n = sizeof kCarriedFdsVariable - 1;
  return std::strncmp(entry, kCarriedFdsVariable, n) == 0 && entry[n] == '=';
}

// Calls `exec(envp)` with the carrier variable added to `envp` (replacing one already there).
template <typename Exec>
int exec_carrying(const char* operation, char* const* envp, Exec&& exec, bool spawns = false) {
  // This program is replaced: its held sessions are committed now, with their errors said (the kernel's
  // close-on-exec would commit them silently). A spawn leaves them held.
  // A spawned child (posix_spawn here, or this exec in a vfork child, which shares our memory) closes
  // its copies of the held descriptors when it execs: see note_child_started.
  if (__builtin_expect(any_held_sessions(), 0)) {
    if (spawns || !owns_file_table()) {
      note_child_started();
    } else {
      commit_all_held("before exec");
    }
  }
  // Close-on-exec descriptors close at the exec: the work of their close first (guard_descriptor.h).
  if (!spawns) finish_close_on_exec_descriptors();
  // The buffered trace lines of this program; not from a vfork child (they are its parent's to write).
  if (current_mode() != Mode::kOff && tracing() && owns_file_table()) flush_all_traces();
  if (current_mode() == Mode::kOff) return exec(envp);
  // An exec by the process itself under the same guarding settings tells the new program that the records
  // are every guarded descriptor it holds (even none), so that it does not look at the others (issue 27).
  const bool exact = !spawns && owns_file_table();
  size_t entries = 0;
  // Every entry, however many: the kernel bounds the environment (E2BIG), and from 65,536 on nothing was
  // carried, silently (test_descriptors ExecFromASmallThreadTest).
  while (envp && envp[entries]) ++entries;
  say_if_new_environment_drops_the_library(operation, envp, entries);
  const bool complete = exact && guarding_settings_in(envp, entries) == g_guarding_settings;
  if (!complete && !g_files.any_tracked()) return exec(envp);
  size_t count = 0;
  for_each_carried(exact, [&](int, Description*) { ++count; });
  if (count == 0 && !complete) return exec(envp);
  // The new environment's pointers first (not on the stack: 3,000 variables are 24 KB, more than a small
  // thread has), then the records, then the variable's text.
  const size_t envp_bytes = (entries + 2) * sizeof(char*);
  const size_t records_bytes = count * sizeof(CarriedFd);
  CarrierMemory memory(envp_bytes + records_bytes + carried_fds_capacity(count));
  if (!memory.get()) {
    say_not_carried(operation, count);
    return exec(envp);
  }
  auto* carried_envp = static_cast<char**>(memory.get());
  auto* fds = reinterpret_cast<CarriedFd*>(static_cast<char*>(memory.get()) + envp_bytes);
  char* carrier = static_cast<char*>(memory.get()) + envp_bytes + records_bytes;
  size_t n = 0;
  for_each_carried(exact, [&](int fd, Description* d) {
    if (n == count) return;  // a descriptor tracked meanwhile by another thread
    // Read without pinning (this may be a vfork child): a description another thread closes meanwhile
    // may have gone back to the kernel and read as zeros (core/page_pool.h), its file null.
    const TrackedFile* file = d->file;
    if (!file) return;
    CarriedFd& f = fds[n++];
    f.fd = fd;
    f.device = file->device;
    f.inode = file->inode;
    f.original_flags = d->site.original_flags;
    f.effective_flags = d->site.effective_flags;
    f.position = d->position;
  });
  count = n;
  format_carried_fds({static_cast<pid_t>(syscall(SYS_getpid)), spawns, complete}, fds, count, carrier,
                     carried_fds_capacity(count));
  size_t e = 0;
  for (size_t i = 0; i < entries; ++i) {
    if (!is_carrier(envp[i])) carried_envp[e++] = envp[i];
  }
  carried_envp[e++] = carrier;
  carried_envp[e] = nullptr;
  int result = exec(carried_envp);
  // Only a failed exec or a spawn returns here; the new program's trace shows what it adopted.
  if (tracing()) {
    keep_errno([&](int error) {
      for (size_t i = 0; i < count; ++i) {
        const Description* d = g_files.lookup(fds[i].fd);
        trace(operation, fds[i].fd, d ? d->path : "", spawns && result != 0 ? -1 : result,
              spawns ? result : error, "%s", "carried to the new program");
      }
    });
  }
  return result;
}

}  // namespace

void appendguard::resolve_exec_functions() {
  real_fcntl.get();
  real_execve.get();
  real_execvpe.get();
}

void appendguard::remember_guarding_settings() {
  g_guarding_settings = guarding_settings([](const char* name) { return secure_getenv(name); });
  remember_preload_entry();
}

namespace {

// execl and friends: the variable arguments as an argv array on the stack.
// NOLINTBEGIN(bugprone-macro-parentheses): argv is the name of the array the macro declares.
#define APPENDGUARD_COLLECT_ARGV(first, argv, extra)                                      \
  size_t argc_##argv = 1;                                                                 \
  {                                                                                       \
    va_list count_args;                                                                   \
    va_start(count_args, first);                                                          \
    while (va_arg(count_args, char*) != nullptr) ++argc_##argv;                           \
    va_end(count_args);                                                                   \
  }                                                                                       \
  char** argv = static_cast<char**>(__builtin_alloca((argc_##argv + 1) * sizeof(char*))); \
  {                                                                                       \
    va_list args;                                                                         \
    va_start(args, first);                                                                \
    argv[0] = const_cast<char*>(first);                                                   \
    for (size_t i = 1; i <= argc_##argv; ++i) argv[i] = va_arg(args, char*);              \
    extra;                                                                                \
    va_end(args);                                                                         \
  }
// NOLINTEND(bugprone-macro-parentheses)

}  // namespace

APPENDGUARD_HOOK int execve(const char* path, char* const argv[], char* const envp[]) {
  say_if_exec_leaves_guarded_descriptors("execve", path);
  return exec_carrying("execve", envp, [&](char* const* e) { return real_execve(path, argv, e); });
}

APPENDGUARD_HOOK int execv(const char* path, char* const argv[]) {
  say_if_exec_leaves_guarded_descriptors("execv", path);
  return exec_carrying("execv", environ, [&](char* const* e) { return real_execve(path, argv, e); });
}

APPENDGUARD_HOOK int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return exec_carrying("execvpe", envp, [&](char* const* e) { return real_execvpe(file, argv, e); });
}

APPENDGUARD_HOOK int execvp(const char* file, char* const argv[]) {
  return exec_carrying("execvp", environ, [&](char* const* e) { return real_execvpe(file, argv, e); });
}

APPENDGUARD_HOOK int fexecve(int fd, char* const argv[], char* const envp[]) {
  return exec_carrying("fexecve", envp, [&](char* const* e) { return real_fexecve(fd, argv, e); });
}

APPENDGUARD_HOOK int execveat(int dirfd, const char* path, char* const argv[], char* const envp[],
                              int flags) {
  return exec_carrying("execveat", envp,
                       [&](char* const* e) { return real_execveat(dirfd, path, argv, e, flags); });
}

APPENDGUARD_HOOK int execl(const char* path, const char* arg, ...) {
  APPENDGUARD_COLLECT_ARGV(arg, argv, (void)0);
  return exec_carrying("execl", environ, [&](char* const* e) { return real_execve(path, argv, e); });
}

APPENDGUARD_HOOK int execlp(const char* file, const char* arg, ...) {
  APPENDGUARD_COLLECT_ARGV(arg, argv, (void)0);
  return exec_carrying("execlp", environ, [&](char* const* e) { return real_execvpe(file, argv, e); });
}

APPENDGUARD_HOOK int execle(const char* path, const char* arg, ...) {
  char* const* envp = nullptr;
  APPENDGUARD_COLLECT_ARGV(arg, argv, envp = va_arg(args, char* const*));
  return exec_carrying("execle", envp, [&](char* const* e) { return real_execve(path, argv, e); });
}

APPENDGUARD_HOOK int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                                 const posix_spawnattr_t* attributes, char* const argv[],
                                 char* const envp[]) {
  return exec_carrying(
      "posix_spawn", envp,
      [&](char* const* e) { return real_posix_spawn(pid, path, actions, attributes, argv, e); }, true);
}

APPENDGUARD_HOOK int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                                  const posix_spawnattr_t* attributes, char* const argv[],
                                  char* const envp[]) {
  return exec_carrying(
      "posix_spawnp", envp,
      [&](char* const* e) { return real_posix_spawnp(pid, file, actions, attributes, argv, e); }, true);
}
