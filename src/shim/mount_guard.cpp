#include "shim/mount_guard.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "core/lock.h"
#include "shim/runtime.h"

namespace appendguard {

std::atomic<const MountTable*> g_mount_table{nullptr};
std::atomic<const MountTable*> g_all_mounts{nullptr};

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
  std::string text;
  if (!read_mountinfo(text)) return;
  auto* table = new MountTable;
  // APPENDGUARD_FS=none: no mount is guarded whole, but the kinds still choose the reopen mode.
  table->load(text, g_config->mounts);
  g_all_mounts.store(table, std::memory_order_release);
  g_files.watch_untracked_failures(table->any_unguarded_fuse());
  g_mount_table.store(table->any_append_only() ? table : nullptr, std::memory_order_release);
}

namespace {

constinit Lock g_refresh_lock;
constexpr size_t kMaxRefreshes = 16;
dev_t g_refreshed_for[kMaxRefreshes] = {};
size_t g_refresh_count = 0;

}  // namespace

void refresh_mounts_for(dev_t device) {
  const MountTable* all = g_all_mounts.load(std::memory_order_acquire);
  if (!all || all->knows_device(device)) return;
  {
    LockGuard guard(g_refresh_lock);
    for (size_t i = 0; i < g_refresh_count; ++i) {
      if (g_refreshed_for[i] == device) return;  // read again already: not a mount (btrfs subvolumes...)
    }
    if (g_refresh_count == kMaxRefreshes) return;
    g_refreshed_for[g_refresh_count++] = device;
  }
  InternalScope internal;
  load_mount_table();
}

}  // namespace appendguard
