#include "shim/guarded_paths.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string_view>

#include "core/mount_table.h"
#include "core/path.h"
#include "report/report.h"
#include "shim/mount_guard.h"
#include "shim/path_scratch.h"
#include "shim/real_io.h"
#include "shim/runtime.h"

namespace appendguard {
namespace {

// The directory a relative path is resolved against: the working directory or an openat dirfd.
bool base_directory(int dirfd, char* out, size_t capacity) {
  if (dirfd == AT_FDCWD) return getcwd(out, capacity) != nullptr;
  return descriptor_path(dirfd, out, capacity);
}

// A descriptor's own name in /proc ("/proc/self/fd/N", "/proc/thread-self/fd/N", "/proc/PID/fd/N",
// "/dev/fd/N"): opening it reopens the file behind the descriptor, which is what must be decided on.
bool names_a_descriptor(std::string_view path) {
  if (path.starts_with("/dev/fd/")) return true;
  if (!path.starts_with("/proc/")) return false;
  path.remove_prefix(6);
  size_t slash = path.find('/');
  if (slash == std::string_view::npos || slash == 0) return false;
  std::string_view owner = path.substr(0, slash);
  if (owner != "self" && owner != "thread-self" &&
      owner.find_first_not_of("0123456789") != std::string_view::npos) {
    return false;
  }
  return path.substr(slash).starts_with("/fd/");
}

// The file a descriptor's /proc name stands for, into `out` (kMaxPath bytes): false if it is not one, or
// if it is not a file with a path (a pipe, a socket, a deleted file).
bool descriptor_target(const char* full_path, char* out) {
  if (!names_a_descriptor(full_path)) return false;
  ssize_t n = readlink(full_path, out, kMaxPath - 1);
  if (n <= 0 || out[0] != '/') return false;
  out[n] = '\0';
  return true;
}

// A path too long to resolve (or no memory to resolve it in) cannot be matched against the patterns:
// said once per process.
void notice_unresolvable_path(int dirfd, const char* path, bool no_memory) {
  static constinit OncePerProcess told;
  if (!told.first_time()) return;
  char message[512];
  if (no_memory) {
    std::snprintf(
        message, sizeof message,
        "a write open of \"%.200s\" (dirfd %d) is not guarded: no memory could be mapped to resolve "
        "its path (%zu bytes per thread), so neither APPENDGUARD_PATHS patterns nor whole-mount "
        "guarding can be applied to it (said once per process)",
        path, dirfd, kPathSlots * kMaxPath);
  } else {
    std::snprintf(
        message, sizeof message,
        "a write open of \"%.200s...\" (%zu bytes, dirfd %d) is not guarded: its absolute path does "
        "not fit in %zu bytes, so APPENDGUARD_PATHS patterns with '/' cannot be matched against it "
        "(said once per process)",
        path, std::strlen(path), dirfd, kMaxPath);
  }
  InternalScope internal;
  report_notice(message);
}

}  // namespace

namespace {

// resolve_full_path's work on a path whose length is known; returns the full path's length (0: not
// resolved).
size_t make_full_path(int dirfd, std::string_view path, char* out) {
  size_t length = 0;
  if (!path.empty() && path[0] == '/') {
    length = normalize_path({}, path, out, kMaxPath);
  } else {
    PathLease lease(1);
    char* base = lease.get();
    if (!base || !base_directory(dirfd, base, kMaxPath)) return 0;
    length = normalize_path(base, path, out, kMaxPath);
  }
  // /proc/self/fd/N: the file it reopens.
  if (length != 0 && starts_like_a_descriptor_name({out, length}) && names_a_descriptor({out, length})) {
    PathLease lease(1);
    char* target = lease.get();
    if (target && descriptor_target(out, target)) {
      length = std::strlen(target);
      std::memcpy(out, target, length + 1);
    }
  }
  return length;
}

}  // namespace

bool resolve_full_path(int dirfd, const char* path, char* out) {
  if (!out) {  // no per-thread path buffer could be mapped
    notice_unresolvable_path(dirfd, path, true);
    return false;
  }
  return make_full_path(dirfd, path, out) != 0;
}

bool descriptor_path(int fd, char* out, size_t capacity) {
  // "/proc/self/fd/" and the number, without snprintf.
  char link[32] = "/proc/self/fd/";
  char digits[12];
  size_t count = 0;
  unsigned value = static_cast<unsigned>(fd);
  do {
    digits[count++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0 && count < sizeof digits);
  size_t at = 14;
  while (count > 0) link[at++] = digits[--count];
  link[at] = '\0';
  ssize_t n = readlink(link, out, capacity - 1);
  if (n <= 0) return false;
  out[n] = '\0';
  return true;
}

namespace {

// `full_path` (`length` bytes) with the symlinks of its directory resolved (the directory must exist), as
// getcwd and /proc/self/fd name it, into `out`; `scratch` is a kMaxPath buffer. Returns its length, 0 if
// it has none.
size_t physical_path_of(const char* full_path, size_t length, char* out, char* scratch) {
  const std::string_view path(full_path, length);
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos || slash == 0) return 0;
  std::memcpy(scratch, full_path, slash);
  scratch[slash] = '\0';
  int fd = real_open(scratch, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) return 0;
  bool ok = descriptor_path(fd, scratch, kMaxPath);
  real_close(fd);
  if (!ok) return 0;
  return normalize_path(scratch, path.substr(slash + 1), out, kMaxPath);
}

// A pattern with '/' that the full path (`length` bytes, made) did not match may match it with the
// symlinks of its directory resolved: then `full_path` becomes that name.
bool matched_physically(const PatternSet& patterns, char* full_path, size_t length, size_t* full_length) {
  PathLease lease(2);
  char* physical = lease.get(0);
  if (!physical) return false;
  const size_t physical_length = physical_path_of(full_path, length, physical, lease.get(1));
  const std::string_view made(physical, physical_length);
  if (physical_length == 0 || made == std::string_view(full_path, length) || !patterns.matches_path(made))
    return false;
  std::memcpy(full_path, physical, physical_length + 1);
  if (full_length) *full_length = physical_length;
  return true;
}

}  // namespace

namespace {

// A relative path already normal, against the working directory: its name (the system call itself, for
// its length) read into `out`, then "/" and the path; 0 for any other (made by make_full_path).
size_t joined_to_working_directory(std::string_view path, char* out) {
  const long n = real_syscall(SYS_getcwd, out, kMaxPath);
  if (n <= 1 || out[0] != '/') return 0;  // an unreachable directory's name does not start with '/'
  return join_plainly_normal(out, static_cast<size_t>(n) - 1, path, kMaxPath);
}

}  // namespace

bool matched_by_made_path(int dirfd, const char* path, size_t length, char* full_path, size_t* full_length) {
  const PatternSet& patterns = g_config->paths;
  const std::string_view given(path, length);
  // A relative path already normal, against the working directory: that directory, "/" and the path,
  // without normalize_path's walk (issue 27).
  if (dirfd == AT_FDCWD && full_path != nullptr && length != 0 && path[0] != '/') {
    const size_t made = joined_to_working_directory(given, full_path);
    if (made != 0 && !starts_like_a_descriptor_name({full_path, made}) &&
        patterns.matches_path({full_path, made})) {
      if (full_length) *full_length = made;
      return true;
    }
  }
  // A descriptor's /proc name ends with a number: its target is what a pattern may match.
  bool proc_name = false;
  if (!patterns.could_match(given)) {
    if (given.empty() || given.back() < '0' || given.back() > '9' || !names_a_descriptor(given)) return false;
    proc_name = true;
  } else {
    proc_name = starts_like_a_descriptor_name(given) && names_a_descriptor(given);
  }
  if (!full_path) {
    notice_unresolvable_path(dirfd, path, true);
    return false;
  }
  if (!proc_name && !patterns.needs_full_path() && !patterns.matches({}, file_name_of(given))) return false;
  size_t made = make_full_path(dirfd, given, full_path);
  if (made == 0) {
    if (patterns.needs_full_path() || proc_name) {
      notice_unresolvable_path(dirfd, path, false);
      return false;
    }
    std::strncpy(full_path, path, kMaxPath - 1);  // a name-only match still counts
    full_path[kMaxPath - 1] = '\0';
    made = std::strlen(full_path);
  }
  const std::string_view resolved(full_path, made);
  // Without patterns with '/', the name matched above; a /proc name is matched by its target's.
  if ((!patterns.needs_full_path() && !proc_name) || patterns.matches_path(resolved)) {
    if (full_length) *full_length = made;
    return true;
  }
  return patterns.needs_full_path() && matched_physically(patterns, full_path, made, full_length);
}

namespace {

// Whether the split path may be a descriptor's /proc name (resolve_full_path reads its link): under /proc
// or /dev/fd.
[[gnu::always_inline]] inline bool may_name_a_descriptor(const SplitPath& split) {
  const std::string_view head = split.head;
  if (split.tail.empty()) return head.starts_with("/proc/") || head.starts_with("/dev/fd/");
  // Relative: from a working directory in /proc, /dev/fd or /dev itself, or from "/".
  if (head.size() == 1) return split.tail.starts_with("proc") || split.tail.starts_with("dev");
  return head.starts_with("/proc") || head.starts_with("/dev/fd") || head == "/dev";
}

// True when the path is told to be on no append-only mount without being made.
[[gnu::always_inline]] inline bool surely_outside(const MountTable& table, const SplitPath& split) {
  return !may_name_a_descriptor(split) && !table.may_be_on_append_only_mount(split);
}

[[gnu::noinline]] bool on_append_only_mount_slowly(int dirfd, const char* path, char* full_path,
                                                   const MountTable& table) {
  return resolve_full_path(dirfd, path, full_path) && table.append_only_mount_of(full_path);
}

// A relative path: the base directory's name is needed (getcwd, or the dirfd's link), not the joined path.
[[gnu::noinline]] bool relative_surely_outside_slowly(const MountTable& table, int dirfd,
                                                      std::string_view path, bool plain,
                                                      const DirectoryIdentity& directory) {
  PathLease lease(1);
  char* base = lease.get();
  if (!base) return false;
  size_t length = 0;
  if (dirfd == AT_FDCWD) {
    // The system call itself: its length, without libc's checks and a strlen (an unreachable directory's
    // name does not start with '/', and is not split).
    const long n = real_syscall(SYS_getcwd, base, kMaxPath);
    if (n <= 1) return false;
    length = static_cast<size_t>(n) - 1;
  } else {
    if (!descriptor_path(dirfd, base, kMaxPath)) return false;
    length = std::strlen(base);
  }
  SplitPath split;
  if (!split_normal_path({base, length}, path, split)) return false;
  // Every plain path from this directory is outside: remembered by the directory's identity.
  if (plain && !may_name_a_descriptor({{base, length}, "x"}) &&
      table.clear_of_append_only_mounts({base, length}))
    remember_clear_directory(table, dirfd, directory);
  return surely_outside(table, split);
}

// Not even the name from a directory this thread found clear of the append-only mounts (mount_guard.h:
// keyed by the directory's identity, which a chdir or fchdir changes), for a plain relative path (issue 27).
[[gnu::noinline]] bool relative_surely_outside(const MountTable& table, int dirfd, std::string_view path) {
  const bool plain = plainly_normal_relative(path);
  DirectoryIdentity directory;
  if (plain && directory_known_clear(table, dirfd, directory)) return true;
  return relative_surely_outside_slowly(table, dirfd, path, plain, directory);
}

}  // namespace

bool surely_off_append_only_mounts(int dirfd, const char* path, size_t length) {
  const MountTable* table = g_mount_table.load(std::memory_order_acquire);
  if (!table) return true;
  if (path[0] == '/') {
    SplitPath split;
    return split_normal_path({}, {path, length}, split) && surely_outside(*table, split);
  }
  return relative_surely_outside(*table, dirfd, {path, length});
}

bool on_append_only_mount_made(int dirfd, const char* path, char* full_path) {
  const MountTable* table = g_mount_table.load(std::memory_order_acquire);
  return table && on_append_only_mount_slowly(dirfd, path, full_path, *table);
}

bool on_append_only_mount(int dirfd, const char* path, size_t length, char* full_path) {
  return !surely_off_append_only_mounts(dirfd, path, length) &&
         on_append_only_mount_made(dirfd, path, full_path);
}

bool guards_full_path(const char* full_path) {
  return g_config->paths.matches_path(full_path) || append_only_mount_of(full_path);
}

bool guarded_path(const char* path, char* full_path) {
  return guarded_path_at(AT_FDCWD, path, full_path);
}

bool guarded_path_at(int dirfd, const char* path, char* full_path) {
  if (!path || InternalScope::active() || current_mode() == Mode::kOff) return false;
  if (matched_by_name(dirfd, path, full_path)) return full_path[0] == '/';  // else: not resolvable
  return on_append_only_mount(dirfd, path, full_path);
}

}  // namespace appendguard
