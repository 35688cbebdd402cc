#include "shim/exec_check.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/variables.h"
#include "report/report.h"
#include "shim/guard_descriptor.h"
#include "shim/real_io.h"
#include "shim/runtime.h"

namespace appendguard {
namespace {

// Why the program at `path` will not load the library, or null. System calls through libc's syscall()
// itself: through our hook of it, the open and close were taken as the program's (issue 27: in every
// fork + exec child, its real_openat resolved by a dlsym).
const char* why_unguarded(const char* path) {
  struct stat st;
  if (real_syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) != 0 || !S_ISREG(st.st_mode)) return nullptr;
  if (st.st_mode & (S_ISUID | S_ISGID)) return "a set-uid or set-gid program (the loader ignores LD_PRELOAD)";
  int fd = static_cast<int>(real_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC));
  if (fd < 0) return nullptr;
  const char* why = nullptr;
  // The header and, in the same read, the program headers that follow it (where they are, as in every
  // linker's output: PT_INTERP comes first or second); the others one by one. Issue 27: one system call
  // instead of three for a usual program, in the child before its exec.
  union {
    Elf64_Ehdr header;
    char bytes[1024];
  } start;
  const long got = real_syscall(SYS_pread64, fd, start.bytes, sizeof start.bytes, 0);
  const Elf64_Ehdr& header = start.header;
  if (got >= static_cast<long>(sizeof header) && std::memcmp(header.e_ident, ELFMAG, SELFMAG) == 0 &&
      header.e_ident[EI_CLASS] == ELFCLASS64 && header.e_phentsize == sizeof(Elf64_Phdr) &&
      header.e_phnum > 0 && header.e_phnum < 256) {
    bool interpreter = false;
    for (unsigned i = 0; i < header.e_phnum && !interpreter; ++i) {
      Elf64_Phdr ph;
      const uint64_t at = header.e_phoff + i * sizeof ph;
      if (at < static_cast<uint64_t>(got) && static_cast<uint64_t>(got) - at >= sizeof ph) {
        std::memcpy(&ph, start.bytes + at, sizeof ph);
      } else if (real_syscall(SYS_pread64, fd, &ph, sizeof ph, static_cast<long>(at)) !=
                 static_cast<long>(sizeof ph)) {
        break;
      }
      interpreter = ph.p_type == PT_INTERP;
    }
    if (!interpreter) why = "statically linked (no dynamic loader: LD_PRELOAD is not read)";
  }
  real_syscall(SYS_close, fd);
  return why;
}

// The LD_PRELOAD entry that loaded this library, as written there (empty: it came another way, such as
// /etc/ld.so.preload or a link, which an exec keeps).
char g_preload_entry[kMaxPath];

// The first entry of the list `value` (LD_PRELOAD's: separated by ':' or ' ') for which
// matches(entry, length) is true, or null.
template <typename Matches>
const char* find_list_entry(const char* value, Matches&& matches) {
  for (const char* at = value; *at;) {
    const size_t length = std::strcspn(at, ": ");
    if (matches(at, length)) return at;
    at += length;
    if (*at) ++at;
  }
  return nullptr;
}

// Whether the list `value` holds `entry`.
bool list_holds(const char* value, const char* entry) {
  const size_t n = std::strlen(entry);
  return find_list_entry(value, [&](const char* at, size_t length) {
           return length == n && std::strncmp(at, entry, n) == 0;
         }) != nullptr;
}

const char* value_in(char* const* envp, size_t entries, const char* name) {
  const size_t n = std::strlen(name);
  for (size_t i = 0; i < entries; ++i) {
    if (std::strncmp(envp[i], name, n) == 0 && envp[i][n] == '=') return envp[i] + n + 1;
  }
  return nullptr;
}

// The guarded descriptors that survive this exec (not close-on-exec in the exec'ing process: its own, or
// a vfork child's table); the lowest in `first`.
int surviving_guarded_descriptors(int& first) {
  int count = 0;
  first = -1;
  for_each_tracked_by_close_on_exec(false, [&](int fd, Description*) {
    if (first < 0) first = fd;
    ++count;
  });
  return count;
}

}  // namespace

void remember_preload_entry() {
  Dl_info info{};
  const char* preload = secure_getenv("LD_PRELOAD");
  if (!preload || !dladdr(reinterpret_cast<void*>(&remember_preload_entry), &info) || !info.dli_fname) return;
  const char* loaded = info.dli_fname;
  const char* loaded_base = std::strrchr(loaded, '/') ? std::strrchr(loaded, '/') + 1 : loaded;
  size_t found_length = 0;
  const char* found = find_list_entry(preload, [&](const char* at, size_t length) {
    // As written (a path), or a bare name the loader looked up.
    const bool same = (length == std::strlen(loaded) && std::strncmp(at, loaded, length) == 0) ||
                      (std::memchr(at, '/', length) == nullptr && length == std::strlen(loaded_base) &&
                       std::strncmp(at, loaded_base, length) == 0);
    found_length = length;
    return same && length < sizeof g_preload_entry;
  });
  if (!found) return;
  std::memcpy(g_preload_entry, found, found_length);
  g_preload_entry[found_length] = '\0';
}

void say_if_new_environment_drops_the_library(const char* operation, char* const* envp, size_t entries) {
  if (current_mode() == Mode::kOff || InternalScope::active() || !g_files.any_tracked()) return;
  const char* preload = value_in(envp, entries, "LD_PRELOAD");
  const char* mode = value_in(envp, entries, "APPENDGUARD");
  const char* why = nullptr;
  if (g_preload_entry[0] && (!preload || !list_holds(preload, g_preload_entry))) {
    why = "LD_PRELOAD no longer names the library";
  } else if (!mode || mode_value_is_off(mode)) {
    why = mode ? "APPENDGUARD is off there" : "APPENDGUARD is unset there";
  } else {
    return;
  }
  int first = -1;
  const int count = surviving_guarded_descriptors(first);
  if (count == 0) return;
  Description* d = g_files.lookup(first);
  char message[kMaxPath * 2 + 700];
  std::snprintf(
      message, sizeof message,
      "%s: the environment given to the new program does not load appendguard (%s%s%s), and it "
      "inherits %d guarded descriptor%s (fd %d: %s): its writes there are not checked (an O_RDWR "
      "open appendguard rewrote is O_APPEND in the kernel: a write at its position lands at the end "
      "instead of being refused); keep LD_PRELOAD and APPENDGUARD in the environment passed to exec, "
      "or close the descriptors before it (O_CLOEXEC); see docs/limits.md",
      operation, why, g_preload_entry[0] && why[0] == 'L' ? ": " : "",
      g_preload_entry[0] && why[0] == 'L' ? g_preload_entry : "", count, count == 1 ? "" : "s", first,
      d ? d->path : "?");
  InternalScope internal;
  report_notice(message);
}

void say_if_exec_leaves_guarded_descriptors(const char* operation, const char* path) {
  if (!path || current_mode() == Mode::kOff || InternalScope::active() || !g_files.any_tracked()) return;
  int first = -1;
  const int count = surviving_guarded_descriptors(first);
  if (count == 0) return;
  const char* why = why_unguarded(path);
  if (!why) return;
  Description* d = g_files.lookup(first);
  char message[kMaxPath + 600];
  std::snprintf(
      message, sizeof message,
      "%s(\"%s\"): the new program is %s, and it inherits %d guarded descriptor%s (fd %d: %s): its "
      "writes there are not checked (a write at a position other than the end of file lands as the "
      "kernel places it); close them before the exec (O_CLOEXEC) or run a dynamically linked program; "
      "see docs/limits.md",
      operation, path, why, count, count == 1 ? "" : "s", first, d ? d->path : "?");
  InternalScope internal;
  report_notice(message);
}

}  // namespace appendguard
