#include "shim/mount_guard.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "shim/runtime.h"

namespace appendguard {

const MountTable* g_mount_table = nullptr;

namespace {

bool read_mountinfo(std::string& out) {
  int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/proc/self/mountinfo", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  char buffer[16384];
  while (true) {
    ssize_t n = syscall(SYS_read, fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  syscall(SYS_close, fd);
  return true;
}

}  // namespace

void load_mount_table() {
  if (g_config->mounts.none()) return;
  std::string text;
  if (!read_mountinfo(text)) return;
  auto* table = new MountTable;
  table->load(text, g_config->mounts);
  if (!table->any_append_only()) {
    delete table;
    return;
  }
  g_mount_table = table;
}

}  // namespace appendguard
