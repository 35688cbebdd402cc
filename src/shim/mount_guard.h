// Whole-mount guarding (APPENDGUARD_FS): on a mount known to be append-only or write-once, every file
// opened for writing is guarded, whatever its name. The mount table is read once, at its first use
// (mount_table_pointer.h; again when a guarded file is on a device no mount of it has: a mount made later); a
// lookup is a string comparison per mount, and none at all when no mount is append-only.
#pragma once

#include <sys/types.h>

#include <atomic>

#include "core/hidden.h"
#include "core/mount_table.h"
#include "shim/mount_table_pointer.h"

namespace appendguard {

// Reads /proc/self/mountinfo (called at the table's first use, inside our own scope), and when it has an
// rclone mount, the command lines of the rclone processes in /proc (their --vfs-cache-mode decides whether
// the mount is write-once: core/rclone_cmdline.h).
void load_mount_table();
// A guarded file is on `device`, which no mount of the table has: a mount made after the table was
// read. Reads mountinfo again (at most once per such device, for at most 16 devices), so that the
// store's kind is known. Only guarded opens call it, with the st_dev they have already.
void refresh_mounts_after_start(dev_t device);
// In a fork child (its handler): the lock of those rereadings, which another thread may have held.
void reset_mount_refresh_after_fork_child();

// Null when no mount is append-only. Replaced tables are never freed (a reader may still use one).
extern APPENDGUARD_HIDDEN MountTablePointer g_mount_table;
// Every mount, append-only or not (the store kind of a file guarded by name); null if unread.
extern APPENDGUARD_HIDDEN MountTablePointer g_all_mounts;

// The append-only mount holding `full_path` (absolute, normalized), or null.
inline const MountEntry* append_only_mount_of(const char* full_path) {
  const MountTable* table = g_mount_table.load(std::memory_order_acquire);
  return table ? table->append_only_mount_of(full_path) : nullptr;
}
// The kind of store holding `full_path` (absolute, normalized); kAppends when no mount is known.
inline StoreKind store_kind_of(const char* full_path) {
  const MountTable* table = g_all_mounts.load(std::memory_order_acquire);
  return table && table->any_write_once() ? table->store_kind_of(full_path) : StoreKind::kAppends;
}
// Whether every relative path without ".", ".." or empty components from the directory `dirfd` names
// (AT_FDCWD: the working directory) is surely on no append-only mount of `table`, as this thread found for
// the same directory before (remember_clear_directory). `identity` receives the directory's (a statx: what
// a chdir or fchdir changes); false when it is not known clear, or when statx cannot tell (then `identity`
// has mount id 0).
inline bool directory_known_clear(const MountTable& table, int dirfd, DirectoryIdentity& identity);  // below
// The directory `dirfd` names was found clear (MountTable::clear_of_append_only_mounts of its name, read
// after `identity` was): remembered if it is still the directory of that identity.
void remember_clear_directory(const MountTable& table, int dirfd, const DirectoryIdentity& identity);
// refresh_mounts_after_start(device) unless the table knows the device (inline: every guarded open of an
// existing file asks).
inline void refresh_mounts_for(dev_t device) {
  const MountTable* all = g_all_mounts.load(std::memory_order_acquire);
  if (!all || all->knows_device(device)) return;
  refresh_mounts_after_start(device);
}
// This thread's directory found clear last (a vfork child's is its parent's, a fork child's a copy: keyed
// by the directory itself, it is never wrong for another working directory).
extern APPENDGUARD_HIDDEN
    __attribute__((tls_model("initial-exec"))) constinit thread_local ClearDirectoryCache t_clear_directory;
// The identity of the directory `dirfd` names (AT_FDCWD: the working directory); false (and mount id 0)
// when statx cannot tell it (before Linux 5.8 it has no mount id).
bool identify_directory(int dirfd, DirectoryIdentity& identity);
inline bool directory_known_clear(const MountTable& table, int dirfd, DirectoryIdentity& identity) {
  return identify_directory(dirfd, identity) && t_clear_directory.holds(&table, identity);
}
inline bool any_append_only_mount() {
  return g_mount_table.load(std::memory_order_relaxed) != nullptr;
}

}  // namespace appendguard
