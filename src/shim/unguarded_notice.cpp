#include "shim/unguarded_notice.h"

#include <cstring>

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core/unguarded_failure.h"
#include "report/report.h"
#include "shim/guarded_paths.h"
#include "shim/mount_guard.h"
#include "shim/real_io.h"
#include "shim/runtime.h"

namespace appendguard {
namespace {

constinit ToldFiles g_told;

// Says it when `path` is on a FUSE mount and `key` was not told before.
void tell(const char* call, const char* path, int error, uint64_t key) {
  const MountTable* mounts = g_all_mounts.load(std::memory_order_acquire);
  const MountEntry* mount = mounts ? mounts->mount_entry_of(path) : nullptr;
  if (!mount || !is_fuse_type(mount->type) || append_only_mount_of(path) || !g_told.first_time(key)) return;
  UnguardedFailure f;
  f.call = call;
  f.path = path;
  f.error = error;
  f.mount_type = mount->type;
  f.mount_point = mount->mount_point;
  const char* paths = getenv("APPENDGUARD_PATHS");
  f.paths = paths ? paths : "";
  char message[1024];
  format_unguarded_failure(f, message, sizeof message);
  report_notice(message);
}

}  // namespace

void note_unguarded_failure(const char* call, int fd, int error) {
  if (current_mode() == Mode::kOff || !is_store_refusal(error) || InternalScope::active()) return;
  // copy_file_range, sendfile and splice fail on many descriptors on every file system (EBADF for an
  // O_APPEND output: bash `>>` then cat); programs fall back to read and write, where a store's refusal
  // is seen. Said here, it was a false alarm on unguarded stores (rclone --vfs-cache-mode writes).
  if (std::strcmp(call, "copy_file_range") == 0 || std::strcmp(call, "sendfile") == 0 ||
      std::strcmp(call, "splice") == 0) {
    return;
  }
  InternalScope internal;
  struct stat st;
  char path[kMaxPath];
  if (real_fstat(fd, &st) != 0 || !descriptor_path(fd, path, sizeof path)) {
    errno = error;
    return;
  }
  tell(call, path, error, file_key(st.st_dev, st.st_ino));
  errno = error;
}

void note_unguarded_close_failure(int fd, int error) {
  if (current_mode() == Mode::kOff || !is_store_refusal_at_close(error) || InternalScope::active()) return;
  // Until the mount table is read every close is watched (mount_table_pointer.h): read, it says whether
  // some FUSE mount is not guarded whole.
  g_all_mounts.load(std::memory_order_acquire);
  if (!g_files.watching_untracked_failures()) {
    errno = error;
    return;
  }
  static constinit OncePerProcess told;
  if (!told.first_time()) {
    errno = error;
    return;
  }
  InternalScope internal;
  const MountTable* mounts = g_all_mounts.load(std::memory_order_acquire);
  char described[512] = "";
  if (mounts) mounts->describe_unguarded_fuse(described, sizeof described);
  UnguardedCloseFailure f;
  f.fd = fd;
  f.error = error;
  f.mounts = described;
  const char* paths = getenv("APPENDGUARD_PATHS");
  f.paths = paths ? paths : "";
  char message[1024];
  format_unguarded_close_failure(f, message, sizeof message);
  report_notice(message);
  errno = error;
}

void note_unguarded_open_failure(const char* call, int dirfd, const char* path, int error) {
  if (current_mode() == Mode::kOff || !is_store_refusal(error) || InternalScope::active()) return;
  InternalScope internal;
  char full_path[kMaxPath];
  if (resolve_full_path(dirfd, path, full_path)) tell(call, full_path, error, path_key(full_path));
  errno = error;
}

}  // namespace appendguard
