// exec and spawn: the new program inherits our descriptors but not our table. Guarded descriptors that
// stay open across exec are described in one environment variable (core/carried_fds.h) that the
// library reads back in the new program, so that a descriptor whose O_RDWR we rewrote into an append
// keeps what the program asked for and where it was. Nothing happens when no descriptor is tracked.
// system() and popen() spawn with glibc's internal calls: they carry nothing (hooks_spawn.cpp).
#include <stdarg.h>

#include <cstring>

#include "core/carried_fds.h"
#include "shim/exec_check.h"
#include "shim/held_sessions.h"
#include "shim/hook.h"
#include "shim/trace.h"

extern char** environ;

using namespace appendguard;

namespace {

constexpr size_t kCarrierCapacity = 64 + kMaxCarriedFds * 64;
constexpr size_t kMaxEnvironment = 1 << 16;

// The guarded descriptors the new program may hold. Close-on-exec ones count too: a vfork child's dup2
// onto stdout (Python's subprocess, posix_spawn's file actions) is not in the table, and the new program
// finds its record by file. Reads the table without locks: this may run in a vfork child, which must not
// wait for a lock a thread of its parent holds.
size_t collect_carried(CarriedFd* out) {
  size_t count = 0;
  int highest = g_files.highest_fd();
  for (int fd = 0; fd <= highest && count < kMaxCarriedFds; ++fd) {
    Description* d = g_files.lookup(fd);
    if (!d) continue;
    CarriedFd& f = out[count++];
    f.fd = fd;
    f.device = d->file->device;
    f.inode = d->file->inode;
    f.original_flags = d->site.original_flags;
    f.effective_flags = d->site.effective_flags;
    f.position = d->position;
  }
  return count;
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
  // The buffered trace lines of this program; not from a vfork child (they are its parent's to write).
  if (current_mode() != Mode::kOff && tracing() && owns_file_table()) flush_all_traces();
  if (current_mode() == Mode::kOff || !g_files.any_tracked()) return exec(envp);
  CarriedFd fds[kMaxCarriedFds];
  size_t count = collect_carried(fds);
  size_t entries = 0;
  while (envp && envp[entries] && entries < kMaxEnvironment) ++entries;
  if (count == 0 || entries >= kMaxEnvironment) return exec(envp);
  char carrier[kCarrierCapacity];
  format_carried_fds({static_cast<pid_t>(syscall(SYS_getpid)), spawns}, fds, count, carrier, sizeof carrier);
  char** carried_envp = static_cast<char**>(__builtin_alloca((entries + 2) * sizeof(char*)));
  size_t n = 0;
  for (size_t i = 0; i < entries; ++i) {
    if (!is_carrier(envp[i])) carried_envp[n++] = envp[i];
  }
  carried_envp[n++] = carrier;
  carried_envp[n] = nullptr;
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
