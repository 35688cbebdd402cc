#include "shim/exec_check.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "report/report.h"
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

}  // namespace

void say_if_exec_leaves_guarded_descriptors(const char* operation, const char* path) {
  if (!path || current_mode() == Mode::kOff || InternalScope::active() || !g_files.any_tracked()) return;
  int first = -1;
  int count = 0;
  const int highest = g_files.highest_fd();
  for (int fd = g_files.next_slot(0, highest); fd <= highest; fd = g_files.next_slot(fd + 1, highest)) {
    if (!g_files.lookup(fd)) continue;
    long flags = real_syscall(SYS_fcntl, fd, F_GETFD);
    if (flags < 0 || (flags & FD_CLOEXEC)) continue;
    if (first < 0) first = fd;
    ++count;
  }
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
