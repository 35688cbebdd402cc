#include "shim/descriptor_identity.h"

#include <fcntl.h>
#include <linux/kcmp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "report/report.h"
#include "shim/guard_descriptor.h"
#include "shim/guard_open.h"
#include "shim/guarded_paths.h"
#include "shim/real_io.h"
#include "shim/trace.h"

namespace appendguard {

bool opens_a_tracked_file_slow(int dirfd, const char* path, char* full_path) {
  struct stat64 st;
  if (fstatat64(dirfd, path, &st, 0) != 0 || !S_ISREG(st.st_mode)) return false;
  if (!g_files.tracks_file(st.st_dev, st.st_ino)) return false;
  if (!resolve_full_path(dirfd, path, full_path)) std::snprintf(full_path, kMaxPath, "%s", path);
  return true;
}

namespace {

// Out of line: its message buffer (4.5 KiB) was in the frame of every guarded open (issue 24, item 6).
[[gnu::noinline]] void say_open_in_child_sharing_memory(const char* function, const char* full_path) {
  char message[kMaxPath + 400];
  std::snprintf(message, sizeof message,
                "%s(\"%s\") in a child process that shares its parent's memory (vfork, clone(CLONE_VM)): "
                "such a child has no file table of its own, so the open is left exactly as asked and not "
                "guarded; its writes land where the kernel puts them (docs/limits.md)",
                function, full_path);
  report_notice(message);
}

}  // namespace

bool open_in_child_sharing_memory(const char* function, const char* full_path) {
  if (__builtin_expect(owns_file_table(), 1)) return false;
  say_open_in_child_sharing_memory(function, full_path);
  return true;
}

// kcmp(KCMP_FILE) answers exactly, for any file. Where it is missing (a kernel without CONFIG_KCMP, a
// seccomp filter refusing it), the file status flags answer: they belong to the open file description,
// so O_NONBLOCK set on `a` shows on `b` only if both are one description (it changes nothing for a regular
// file, and is put back at once). The device, inode and flags alone would take two opens of one file with
// the same flags for one description.
bool same_open_description(int a, int b) {
  const pid_t pid = static_cast<pid_t>(syscall(SYS_getpid));
  long compared = syscall(SYS_kcmp, pid, pid, KCMP_FILE, a, b);
  if (compared >= 0) return compared == 0;
  int flags_a = real_fcntl(a, F_GETFL);
  int flags_b = real_fcntl(b, F_GETFL);
  if (flags_a < 0 || flags_b < 0 || flags_a != flags_b) return false;
  if (real_fcntl(a, F_SETFL, flags_a ^ O_NONBLOCK) != 0) return false;
  const bool same = (real_fcntl(b, F_GETFL) & O_NONBLOCK) != (flags_b & O_NONBLOCK);
  real_fcntl(a, F_SETFL, flags_a);
  return same;
}

namespace {

// Issue 24, item 4: the process's own rewritten descriptor sent to itself was adopted as a plain
// O_APPEND descriptor, so lseek(0) + write appended. The received number shares the tracked description.
bool share_own_description(const char* operation, int fd) {
  if (!g_files.any_live_file()) return false;
  struct stat64 st;
  if (real_fstat64(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  int candidates[16];
  size_t count = g_files.descriptors_of_file(st.st_dev, st.st_ino, candidates, 16);
  if (count > 16) count = 16;
  for (size_t i = 0; i < count; ++i) {
    if (candidates[i] == fd || !same_open_description(candidates[i], fd)) continue;
    g_files.alias(candidates[i], fd);
    if (tracing()) {
      if (const Description* d = g_files.lookup(fd)) {
        trace(operation, fd, d->path, fd, 0, "descriptor received (SCM_RIGHTS): the description of fd=%d",
              candidates[i]);
      }
    }
    return true;
  }
  return false;
}

// Issue 24, item 16: a guarded descriptor from another process that the kernel shows O_APPEND. Its
// writes append, checked as appends; if that process's appendguard rewrote an O_RDWR open, a write meant
// at the position appends instead of being refused. Said once per process.
void say_received_append(const char* operation, int fd, const Description* d) {
  static OncePerProcess told;
  if (!told.first_time()) return;
  char message[kMaxPath + 600];
  std::snprintf(
      message, sizeof message,
      "%s: fd %d (%s), received from another process over a unix socket, is O_APPEND in the kernel: "
      "its writes land at the end of file whatever its position, and are checked as appends. If that "
      "process opened it read-write and appendguard rewrote the open into an append, a write it "
      "meant at another position appends here instead of being refused: pass the path and open it "
      "in this process instead (docs/limits.md; said once per process)",
      operation, fd, d->path);
  report_notice(message);
}

}  // namespace

void receive_descriptors(const char* operation, const msghdr* message) {
  if (!owns_file_table()) return;
  for (const cmsghdr* c = CMSG_FIRSTHDR(message); c;
       c = CMSG_NXTHDR(const_cast<msghdr*>(message), const_cast<cmsghdr*>(c))) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* data = CMSG_DATA(c);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, data + i * sizeof(int), sizeof fd);
      forget_if_stale(fd);
      if (share_own_description(operation, fd)) continue;
      if (!adopt_if_guarded(fd, "recvmsg (SCM_RIGHTS)", nullptr, 0)) continue;
      const Description* d = g_files.lookup(fd);
      if (!d) continue;
      if (tracing()) trace(operation, fd, d->path, fd, 0, "%s", "descriptor received (SCM_RIGHTS)");
      if (d->kernel_appends) say_received_append(operation, fd, d);
    }
  }
}

}  // namespace appendguard
