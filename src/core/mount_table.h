// Which mounts are append-only or write-once, from /proc/self/mountinfo and APPENDGUARD_FS. Pure: the
// setting, the mountinfo text and the path lookup are plain data, so every case is unit-testable.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/path.h"
#include "core/rclone_cmdline.h"
#include "core/store_table.h"

namespace appendguard {

// APPENDGUARD_FS: which mounts guard every file written on them, whatever its name.
struct MountSelection {
  bool known = true;      // the stores known to be append-only or write-once (kKnownStores)
  bool any_fuse = false;  // every FUSE mount
  std::vector<std::string>
      extra;  // mount types ("fuse.rclone"), sources ("fuse_dfs") or mount points ("/mnt/x")
  // MOUNT_POINT=NAME: the mount at that point is the store of that name (core/stores.def), guarded whole;
  // for stores that cannot be told from their mount (Databricks volumes, ossfs 2.0, alluxio-fuse...).
  struct NamedStore {
    std::string mount_point;
    StoreId store;
  };
  std::vector<NamedStore> named;
  bool none() const { return !known && !any_fuse && extra.empty() && named.empty(); }
};

// Parses APPENDGUARD_FS: "known" (the default), "fuse", "none", or a comma-separated list of those and of
// mount types, sources, absolute mount points and MOUNT_POINT=STORE items (each added to the known stores).
// Returns an empty string on success, else why the value is wrong.
std::string parse_mount_selection(std::string_view text, MountSelection& out);

// What a store does with an existing file opened for writing, which decides how enforce mode reopens it
// (docs/stores.md, "How the library chooses"): read from the store's row (core/store_remedy.h
// holds_sessions).
enum class StoreKind {
  kAppends,    // appends work (fuse_dfs, appendonlyfs hdfs/strict, local disks, chattr +a): O_APPEND reopen
  kWriteOnce,  // one sequential upload from 0 per file (rclone off, mountpoint-s3, gcsfuse, appendonlyfs
               // s3 and volumes): hold the first session and reuse it
};

struct MountEntry {
  std::string mount_point;    // unescaped
  std::string type;           // "fuse.appendonlyfs", "fuse", "ext4"...
  std::string source;         // "appendonlyfs:hdfs", "fuse_dfs"...
  std::string options;        // per-mount options ("rw,nosuid,nodev")
  std::string super_options;  // the file system's ("rw,user_id=0,group_id=0")
  // The store's row (core/stores.def), from the mount or from APPENDGUARD_FS's MOUNT_POINT=NAME, and
  // what it means (core/store_remedy.h), set by MountTable::load.
  StoreId store = StoreId::kOther;
  StoreKind kind = StoreKind::kAppends;
  // Whether the store renames (false: mountpoint-s3, appendonlyfs s3 and volumes, whose rename fails
  // ENOSYS; appendguard carries a rename of a file it wrote out itself there: shim/spool.h).
  bool renames = true;
  // Whether the store refuses a rename onto an existing file (HDFS): the target is removed first.
  bool removes_target = false;
  // Whether the store serves O_RDWR and O_APPEND opens from a local cache (rclone minimal).
  bool caches_read_write = false;
  dev_t device = 0;  // from the major:minor field, as stat's st_dev shows it
  // fuse.rclone only: the --vfs-cache-mode of the rclone process serving it (kUnknown: not seen).
  RcloneCacheMode rclone_mode = RcloneCacheMode::kUnknown;
};

// What the mount holding a path says about writing there (issue 27: a guarded open looked the mount up
// four times, its close once more; now once per open, kept in the description for the close).
struct MountFacts {
  StoreKind kind = StoreKind::kAppends;
  bool renames = true;
  // rclone --vfs-cache-mode minimal: a read-write open is served from rclone's local cache (reads and
  // writes anywhere, as on a local disk); only write-only opens stream as one upload (write-once).
  bool caches_read_write = false;
  // A rename onto an existing file is refused (fuse_dfs, appendonlyfs hdfs): the target is removed first.
  bool removes_target = false;
};

// Whether `entry` is an rclone mount whose cache accepts random writes like a local disk
// (--vfs-cache-mode writes or full, seen on its process's command line): not a write-once store.
bool is_rclone_cached(const MountEntry& entry);
// Whether the mountinfo text has an rclone mount (then its processes are worth reading).
bool has_rclone_mount(std::string_view mountinfo);
// Sets entry.rclone_mode from the first of `processes` serving it (a fuse.rclone entry only).
void set_rclone_mode(MountEntry& entry, const std::vector<RcloneProcess>& processes);

// "fuse", "fuseblk", "fuse.rclone", "fuseblk.x": a FUSE mount's type.
bool is_fuse_type(std::string_view type);

// The row of the store `entry` is, from its type and source (and rclone's cache mode when it was seen).
const StoreRow& store_row_of(const MountEntry& entry);
// The kind of store `entry` is, from its row.
StoreKind classify_store(const MountEntry& entry);
// Sets entry's store, kind, renames, removes_target and caches_read_write from `row` (MountTable::load).
void set_store_facts(MountEntry& entry, const StoreRow& row);
const char* store_kind_name(StoreKind kind);
// Whether the store of `entry` renames files: not mountpoint-s3 (general purpose buckets: ENOSYS; an S3
// Express bucket, which renames, cannot be told apart in mountinfo), appendonlyfs s3 and volumes.
bool store_renames(const MountEntry& entry);

// One line of /proc/self/mountinfo; false if it is malformed.
bool parse_mountinfo_line(std::string_view line, MountEntry& out);

// Whether files on `entry` are guarded by `selection` (an rclone mount seen in cache mode writes or full
// is not among the known stores: only an explicit item or `fuse` selects it).
bool is_append_only_mount(const MountEntry& entry, const MountSelection& selection);

// The mounts of a process, each marked append-only or not, looked up by path.
class MountTable {
 public:
  // Builds the table from mountinfo text. Later lines (mounted over earlier ones) win. `rclone`: the
  // rclone processes seen in /proc (their cache modes decide what each fuse.rclone mount is).
  void load(std::string_view mountinfo, const MountSelection& selection,
            const std::vector<RcloneProcess>& rclone = {});
  bool any_append_only() const { return append_only_count_ > 0; }
  // Whether some FUSE mount is not guarded whole: where a store may refuse a file we do not guard.
  bool any_unguarded_fuse() const { return unguarded_fuse_count_ > 0; }
  // "TYPE at MOUNT_POINT" of each FUSE mount not guarded whole, comma-separated, into `out` (truncated to
  // `capacity`, always terminated). Returns the length.
  size_t describe_unguarded_fuse(char* out, size_t capacity) const;
  // The append-only mount holding the absolute, normalized `path` (the longest mount point that is a
  // prefix of it, as the kernel resolves it without symbolic links), or null.
  const MountEntry* append_only_mount_of(std::string_view path) const;
  // False when no append-only mount point is `path` or one of its directories, so that
  // append_only_mount_of of the joined path is null: compared without joining it (issue 27: every write
  // open of an unmatched name asks, on a machine with a store mounted). True: look it up.
  bool may_be_on_append_only_mount(const SplitPath& path) const {
    // Most paths differ from every append-only mount point in their first character after '/'.
    if (!second_chars_[static_cast<unsigned char>(split_path_at(path, 1))]) return false;
    return under_append_only_point(path);
  }
  // Whether some mount has this device (a file on a device the table does not know is on a mount made
  // after the table was read).
  bool knows_device(dev_t device) const {
    // Nearly every guarded open asks about the device the one before it asked about.
    const size_t index = std::atomic_ref<size_t>(last_known_device_).load(std::memory_order_relaxed);
    return (index < devices_.size() && devices_[index] == device) || knows_device_slowly(device);
  }
  // The mount holding `path` (any mount), or null.
  const MountEntry* mount_entry_of(std::string_view path) const;
  // The kind of the mount holding `path` (any mount: a file guarded by name may be on any of them).
  StoreKind store_kind_of(std::string_view path) const;
  // Whether any mount is write-once (else store_kind_of is kAppends for every path).
  bool any_write_once() const { return any_write_once_; }
  // Whether the mount holding `path` renames (true off every known store without rename).
  bool renames_at(std::string_view path) const;
  // Both of them, from one lookup (the defaults when no mount is write-once or without rename).
  MountFacts facts_of(std::string_view path) const;
  // Whether every path under the absolute, normalized `directory` (made by appending a relative path
  // without "." or ".." components) is surely on no append-only mount: no append-only mount point is the
  // directory, one of its ancestors or under it. Pure, for the working directory's cache (mount_guard.h).
  bool clear_of_append_only_mounts(std::string_view directory) const;

 private:
  struct Mount {
    MountEntry entry;
    bool append_only = false;
  };
  std::vector<Mount> mounts_;
  size_t append_only_count_ = 0;
  size_t unguarded_fuse_count_ = 0;
  const Mount* mount_of(std::string_view path) const;
  // The mounts a lookup of one kind needs (issue 27: a write open looked at every mount of the machine):
  // those of the kind and every mount on or under one of them, in table order. The longest prefix among
  // them is of the kind exactly when the longest among all mounts is.
  std::vector<dev_t> devices_;  // every mount's, sorted: knows_device is a binary search (twice per open)
  // The index in devices_ of the device knows_device found last (nearly every guarded open asks about the
  // device of the one before): read and written with std::atomic_ref, relaxed (any index is checked).
  mutable size_t last_known_device_ = 0;
  bool knows_device_slowly(dev_t device) const;
  // A mount of a scope as a lookup compares it: its point's length (a mount longer than the path, or shorter
  // than the best found, is skipped before its characters are compared) and its index into mounts_
  // (a copied table stays right).
  struct Point {
    size_t size;
    size_t index;
  };
  std::vector<Point> append_only_scope_;
  std::vector<std::string> append_only_points_;  // the append-only mounts' points
  bool second_chars_[256] = {};                  // theirs (every one for a mount on "/")
  bool under_append_only_point(const SplitPath& path) const;
  // The mounts on or under a mount whose facts differ from the defaults (facts_of, store_kind_of,
  // renames_at): write-once, without rename, or refusing a rename onto an existing file.
  std::vector<Point> facts_scope_;
  bool any_write_once_ = false;
  const Mount* longest_prefix(const std::vector<Point>& scope, std::string_view path) const;
};

// What a chdir or fchdir changes, however it is made (libc's, a raw system call, glibc's own in nftw): the
// directory's mount id and inode (statx, shim/mount_guard.cpp; a mount has one file system, whose inode
// numbers are unique). Two names of one directory through two mounts (a bind mount) have two mount ids.
struct DirectoryIdentity {
  uint64_t mount_id = 0;
  uint64_t inode = 0;
  bool operator==(const DirectoryIdentity&) const = default;
};

// The last directory found clear of a table's append-only mounts (MountTable::clear_of_append_only_mounts)
// by its identity (issue 27: a write open of a relative name asked for the working directory's name and
// compared it with the mount points every time). Tables are never freed, so a table's address is not
// reused for another.
class ClearDirectoryCache {
 public:
  bool holds(const MountTable* table, const DirectoryIdentity& directory) const {
    return table != nullptr && table == table_ && directory == directory_;
  }
  // The table last: a signal handler's open interrupting this sees no table, not a mixed entry.
  void remember(const MountTable* table, const DirectoryIdentity& directory) {
    table_ = nullptr;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    directory_ = directory;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    table_ = table;
  }

 private:
  const MountTable* table_ = nullptr;
  DirectoryIdentity directory_;
};

}  // namespace appendguard
