#include "shim/mount_guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/lock.h"
#include "report/site_stack.h"
#include "shim/real_io.h"
#include "shim/runtime.h"

namespace appendguard {

constinit MountTablePointer g_mount_table;
constinit MountTablePointer g_all_mounts;

namespace {

// A /proc file's text, read with system calls (inside our own scope, no hook involved).
bool read_proc_file(const char* path, std::string& out, size_t limit) {
  int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  char buffer[16384];
  while (true) {
    ssize_t n = syscall(SYS_read, fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
    if (out.size() >= limit) break;
  }
  syscall(SYS_close, fd);
  return true;
}

bool read_mountinfo(std::string& out) {
  return read_proc_file("/proc/self/mountinfo", out, size_t{64} << 20);
}

// The rclone processes this process can see (issue 23: the cache mode of an rclone mount is only on its
// process's command line). Read only when mountinfo has an rclone mount: one getdents pass over /proc and
// a 16-byte comm read per process. In another container or with /proc hidden none is seen, and every
// rclone mount stays write-once.
std::vector<RcloneProcess> read_rclone_processes() {
  std::vector<RcloneProcess> found;
  int dir = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir < 0) return found;
  alignas(8) char entries[8192];
  while (true) {
    long n = syscall(SYS_getdents64, dir, entries, sizeof entries);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      auto* entry = reinterpret_cast<struct dirent64*>(entries + at);
      at += entry->d_reclen;
      const char* name = entry->d_name;
      if (name[0] < '1' || name[0] > '9') continue;
      std::string base = std::string("/proc/") + name;
      std::string comm;
      if (!read_proc_file((base + "/comm").c_str(), comm, 64) || !is_rclone_comm(comm)) continue;
      RcloneProcess process;
      if (!read_proc_file((base + "/cmdline").c_str(), process.cmdline, size_t{1} << 20)) continue;
      read_proc_file((base + "/environ").c_str(), process.environ, size_t{1} << 20);
      char cwd[4096];
      long length = syscall(SYS_readlinkat, AT_FDCWD, (base + "/cwd").c_str(), cwd, sizeof cwd);
      if (length > 0 && static_cast<size_t>(length) < sizeof cwd)
        process.cwd.assign(cwd, static_cast<size_t>(length));
      found.push_back(std::move(process));
    }
  }
  syscall(SYS_close, dir);
  return found;
}

void load_mount_table_here() {
  std::string text;
  if (!read_mountinfo(text)) return;
  auto* table = new MountTable;
  // APPENDGUARD_FS=none: no mount is guarded whole, but the kinds still choose the reopen mode.
  std::vector<RcloneProcess> rclone;
  if (has_rclone_mount(text)) rclone = read_rclone_processes();
  table->load(text, g_config->mounts, rclone);
  g_all_mounts.store(table, std::memory_order_release);
  g_files.watch_untracked_failures(table->any_unguarded_fuse());
  g_mount_table.store(table->any_append_only() ? table : nullptr, std::memory_order_release);
}

}  // namespace

// On the thread's site stack (report/site_stack.h): the guarded open that reads the table (the first one,
// or one on a new device) may be made by a thread with a small stack, and the reading needs more than the
// 2 KiB a hook may add (its 16 KiB read buffer, the parse, the rclone scan): on a thread of 18 KiB the
// first guarded open ended in SIGSEGV (test_robustness).
void load_mount_table() {
  run_on_site_stack([](void*) { load_mount_table_here(); }, nullptr);
}

namespace {

constinit Lock g_refresh_lock;
constexpr size_t kMaxRefreshes = 16;
dev_t g_refreshed_for[kMaxRefreshes] = {};
size_t g_refresh_count = 0;

}  // namespace

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif

__attribute__((tls_model("initial-exec"))) constinit thread_local ClearDirectoryCache t_clear_directory;

bool identify_directory(int dirfd, DirectoryIdentity& identity) {
  struct statx st;
  // libc's syscall(): from libc's text, not trapped by the raw-system-call layer.
  if (real_syscall(SYS_statx, dirfd, "", AT_EMPTY_PATH, STATX_INO | STATX_MNT_ID, &st) != 0 ||
      !(st.stx_mask & STATX_MNT_ID)) {
    identity.mount_id = 0;
    return false;
  }
  identity.mount_id = st.stx_mnt_id;
  identity.inode = st.stx_ino;
  return true;
}

void remember_clear_directory(const MountTable& table, int dirfd, const DirectoryIdentity& identity) {
  // Read again: a chdir of another thread between the first statx and the name read is not remembered.
  DirectoryIdentity now;
  if (identity.mount_id == 0 || !identify_directory(dirfd, now) || !(now == identity)) return;
  t_clear_directory.remember(&table, identity);
}

void reset_mount_refresh_after_fork_child() {
  g_refresh_lock.reset_in_child();
}

void refresh_mounts_after_start(dev_t device) {
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
