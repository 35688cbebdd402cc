// A call on a file the library does not guard failed on a FUSE mount with a store's typical refusal
// (issue 10, "failures the library did not cause"): one notice per file that says so, why the file was
// not guarded and the setting that would guard it. Pure: the hooks give the facts, this builds the text
// and remembers which files were told, in fixed storage (the notice may come from any thread, even a
// signal handler: nothing here allocates).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace appendguard {

// EOPNOTSUPP, ENOSYS, EPERM, ESPIPE, EINVAL, EBADF: what append-only and write-once stores answer.
bool is_store_refusal(int error);

struct UnguardedFailure {
  const char* call = "";  // "write", "openat"...
  std::string_view path;  // absolute
  int error = 0;
  std::string_view mount_type;
  std::string_view mount_point;
  std::string_view paths;  // APPENDGUARD_PATHS as set ("" when unset: the default)
};

// The notice, without a trailing newline, into `out` (truncated to `capacity`, always terminated).
// Returns its length.
size_t format_unguarded_failure(const UnguardedFailure& f, char* out, size_t capacity);

// A close that fails says nothing of its file (the descriptor is gone, and looking it up before every
// close would cost each close of the program two system calls): the notice names the descriptor, the
// FUSE mounts not guarded whole ("TYPE at MOUNT_POINT", `mounts`, comma-separated) and the settings.
// Said once per process.
struct UnguardedCloseFailure {
  int fd = -1;
  int error = 0;
  std::string_view mounts;  // "fuse.rclone at /mnt/ckpt, fuse.sshfs at /data"
  std::string_view paths;   // APPENDGUARD_PATHS as set ("" when unset: the default)
};
size_t format_unguarded_close_failure(const UnguardedCloseFailure& f, char* out, size_t capacity);

// Whether a close failed as a store reports a refused upload or flush: a store refusal but EBADF, which
// a close gets for a number that was not open (a program's double close, not a store).
bool is_store_refusal_at_close(int error);

// A guarded write open that a store refused itself (appendonlyfs strict refuses an O_TRUNC open of an
// existing non-empty file): appendguard passed the open on as the program asked, so nothing of it can make
// the store accept it. Whether `error` is such a refusal of an open (EPERM, EOPNOTSUPP, ENOSYS, EACCES,
// EINVAL).
bool is_store_refusal_of_open(int error);
struct RefusedOpen {
  const char* call = "";   // "openat"...
  std::string_view path;   // absolute
  std::string_view flags;  // "O_WRONLY|O_CREAT|O_TRUNC"
  int error = 0;
  std::string_view store;  // "fuse.appendonlyfs at /mnt/x"
};
size_t format_refused_open(const RefusedOpen& f, char* out, size_t capacity);

// A write open of a file with the kernel's append-only attribute (chattr +a, FS_APPEND_FL) failed with
// EPERM. `retried`: appendguard opened it again as a guarded file with O_APPEND (what the kernel allows on
// such a file), so this is not said; else (the program truncates it: nothing can) the notice.
struct AppendOnlyRefusal {
  const char* call = "";
  std::string_view path;
  std::string_view flags;
};
size_t format_append_only_refusal(const AppendOnlyRefusal& f, char* out, size_t capacity);
// Whether a write open refused with `error` on a file with the append-only attribute is opened again with
// `rewritten` flags (the kernel takes a write open of such a file only with O_APPEND and without O_TRUNC).
bool retries_on_append_only_file(int error, int flags, int rewritten);

// A rename the store refused (appendonlyfs hdfs and s3 refuse a rename onto an existing file, s3 any
// rename): rsync and safetensors publish a file by renaming a temporary one; appendguard carries a rename
// out on a store without rename only for a file this process wrote (shim/spool.h). Whether to say so: a
// store's refusal (EPERM, EOPNOTSUPP, ENOSYS, EACCES) with either path on a FUSE or guarded mount.
bool notes_refused_rename(int error, bool either_path_on_store);
struct RefusedRename {
  const char* call = "";  // "rename", "renameat2"...
  std::string_view old_path;
  std::string_view new_path;
  int error = 0;
  std::string_view store;  // "fuse.appendonlyfs at /mnt/x"
  // Not a store: the target has the kernel's append-only attribute (chattr +a), which nothing replaces.
  bool append_only_target = false;
};
size_t format_refused_rename(const RefusedRename& f, char* out, size_t capacity);

// The files already told about (device and inode, or a hash of the path for a file that does not
// exist): the last kCapacity of them. A file past those replaces the oldest, so that every file's first
// refusal is said (a full set used to say nothing more: the 65th file a job saw refused was silent).
class ToldFiles {
 public:
  static constexpr size_t kCapacity = 64;
  // True the first time `key` is seen among the last kCapacity keys told, false after.
  bool first_time(uint64_t key);

 private:
  std::atomic<uint64_t> keys_[kCapacity] = {};
  std::atomic<uint32_t> next_replaced_{0};
};

uint64_t file_key(dev_t device, ino_t inode);
uint64_t path_key(std::string_view path);

}  // namespace appendguard
