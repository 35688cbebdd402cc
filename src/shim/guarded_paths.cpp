#include "shim/guarded_paths.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string_view>

#include "core/path.h"
#include "report/report.h"
#include "shim/mount_guard.h"
#include "shim/real_io.h"
#include "shim/runtime.h"

namespace appendguard {
namespace {

// The directory a relative path is resolved against: the working directory or an openat dirfd.
bool base_directory(int dirfd, char* out, size_t capacity) {
  if (dirfd == AT_FDCWD) return getcwd(out, capacity) != nullptr;
  return descriptor_path(dirfd, out, capacity);
}

}  // namespace

bool resolve_full_path(int dirfd, const char* path, char* out) {
  char base[kMaxPath] = "";
  if (path[0] != '/' && !base_directory(dirfd, base, sizeof base)) return false;
  return normalize_path(base, path, out, kMaxPath) > 0;
}

bool descriptor_path(int fd, char* out, size_t capacity) {
  char link[32];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, out, capacity - 1);
  if (n <= 0) return false;
  out[n] = '\0';
  return true;
}

namespace {

// `full_path` with the symlinks of its directory resolved (the directory must exist), as getcwd and
// /proc/self/fd name it; relative opens are resolved this way already.
bool physical_path_of(const char* full_path, char* out) {
  std::string_view path(full_path);
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos || slash == 0) return false;
  char directory[kMaxPath];
  std::memcpy(directory, full_path, slash);
  directory[slash] = '\0';
  int fd = real_open(directory, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) return false;
  char physical_directory[kMaxPath];
  bool ok = descriptor_path(fd, physical_directory, sizeof physical_directory);
  real_close(fd);
  if (!ok) return false;
  return normalize_path(physical_directory, path.substr(slash + 1), out, kMaxPath) > 0;
}

// A path too long to resolve cannot be matched against the patterns: said once per process.
void notice_unresolvable_path(int dirfd, const char* path) {
  static constinit OncePerProcess told;
  if (!told.first_time()) return;
  char message[512];
  std::snprintf(message, sizeof message,
                "a write open of \"%.200s...\" (%zu bytes, dirfd %d) is not guarded: its absolute path does "
                "not fit in %zu bytes, so APPENDGUARD_PATHS patterns with '/' cannot be matched against it "
                "(said once per process)",
                path, std::strlen(path), dirfd, kMaxPath);
  InternalScope internal;
  report_notice(message);
}

}  // namespace

bool matched_by_name(int dirfd, const char* path, char* full_path) {
  const PatternSet& patterns = g_config->paths;
  if (!patterns.could_match(path)) return false;
  if (!patterns.needs_full_path() && !patterns.matches({}, file_name_of(path))) return false;
  if (!resolve_full_path(dirfd, path, full_path)) {
    if (patterns.needs_full_path()) {
      notice_unresolvable_path(dirfd, path);
      return false;
    }
    std::strncpy(full_path, path, kMaxPath - 1);  // a name-only match still counts
    full_path[kMaxPath - 1] = '\0';
  }
  if (!patterns.needs_full_path() || patterns.matches(full_path, file_name_of(full_path))) return true;
  char physical[kMaxPath];
  if (!physical_path_of(full_path, physical) || std::strcmp(physical, full_path) == 0) return false;
  if (!patterns.matches(physical, file_name_of(physical))) return false;
  std::memcpy(full_path, physical, std::strlen(physical) + 1);
  return true;
}

bool guards_full_path(const char* full_path) {
  return g_config->paths.matches(full_path, file_name_of(full_path)) || append_only_mount_of(full_path);
}

bool guarded_path(const char* path, char* full_path) {
  return guarded_path_at(AT_FDCWD, path, full_path);
}

bool guarded_path_at(int dirfd, const char* path, char* full_path) {
  if (!path || InternalScope::active() || current_mode() == Mode::kOff) return false;
  if (matched_by_name(dirfd, path, full_path)) return full_path[0] == '/';  // else: not resolvable
  return any_append_only_mount() && resolve_full_path(dirfd, path, full_path) &&
         append_only_mount_of(full_path);
}

}  // namespace appendguard
