#include "core/unguarded_failure.h"

#include <fcntl.h>

#include <cerrno>
#include <cstdio>

#include "core/errno_names.h"

namespace appendguard {

bool is_store_refusal(int error) {
  return error == EOPNOTSUPP || error == ENOSYS || error == EPERM || error == ESPIPE || error == EINVAL ||
         error == EBADF;
}

bool is_store_refusal_at_close(int error) {
  return error != EBADF && is_store_refusal(error);
}

size_t format_unguarded_close_failure(const UnguardedCloseFailure& f, char* out, size_t capacity) {
  if (capacity == 0) return 0;
  const std::string_view paths = f.paths.empty() ? std::string_view("*.safetensors") : f.paths;
  const int n = std::snprintf(
      out, capacity,
      "close(fd %d) failed with %s on a descriptor appendguard does not guard (its file cannot be named "
      "once closed); on a FUSE store this is where a write-once store refuses an upload. FUSE mounts "
      "not guarded here: %.*s; a pattern of APPENDGUARD_PATHS (now '%.*s') that matches the file, or "
      "APPENDGUARD_FS=fuse, would guard them (said once per process)",
      f.fd, linux_errno_name(f.error), static_cast<int>(f.mounts.size()), f.mounts.data(),
      static_cast<int>(paths.size()), paths.data());
  if (n < 0) {
    out[0] = '\0';
    return 0;
  }
  return static_cast<size_t>(n) < capacity ? static_cast<size_t>(n) : capacity - 1;
}

size_t format_unguarded_failure(const UnguardedFailure& f, char* out, size_t capacity) {
  if (capacity == 0) return 0;
  const int path_length = static_cast<int>(f.path.size());
  const int type_length = static_cast<int>(f.mount_type.size());
  const int point_length = static_cast<int>(f.mount_point.size());
  const std::string_view paths = f.paths.empty() ? std::string_view("*.safetensors") : f.paths;
  const int paths_length = static_cast<int>(paths.size());
  const std::string_view point = f.mount_point == "/" ? std::string_view() : f.mount_point;
  const int n = std::snprintf(
      out, capacity,
      "%s of %.*s failed with %s on %.*s mount %.*s; it is not guarded: no pattern of "
      "APPENDGUARD_PATHS='%.*s' matches it and the mount is not "
      "among APPENDGUARD_FS's stores; APPENDGUARD_PATHS='%.*s:%.*s/**' or "
      "APPENDGUARD_FS=%.*s would guard it",
      f.call, path_length, f.path.data(), linux_errno_name(f.error), type_length, f.mount_type.data(),
      point_length, f.mount_point.data(), paths_length, paths.data(), paths_length, paths.data(),
      static_cast<int>(point.size()), point.data(), type_length, f.mount_type.data());
  if (n < 0) {
    out[0] = '\0';
    return 0;
  }
  return static_cast<size_t>(n) < capacity ? static_cast<size_t>(n) : capacity - 1;
}

namespace {

size_t finished(int n, char* out, size_t capacity) {
  if (n < 0) {
    out[0] = '\0';
    return 0;
  }
  return static_cast<size_t>(n) < capacity ? static_cast<size_t>(n) : capacity - 1;
}

int length(std::string_view s) {
  return static_cast<int>(s.size());
}

}  // namespace

bool is_store_refusal_of_open(int error) {
  return error == EPERM || error == EOPNOTSUPP || error == ENOSYS || error == EACCES || error == EINVAL;
}

size_t format_refused_open(const RefusedOpen& f, char* out, size_t capacity) {
  if (capacity == 0) return 0;
  const int n = std::snprintf(
      out, capacity,
      "%s(\"%.*s\", %.*s) failed with %s: the store (%.*s) refused the open itself; appendguard passed "
      "it on as the program asked (a store that keeps what was written refuses to truncate or replace an "
      "existing file this way) and no setting of appendguard makes the store take it; the file is "
      "unchanged: write under a new name; see docs/limits.md",
      f.call, length(f.path), f.path.data(), length(f.flags), f.flags.data(), linux_errno_name(f.error),
      length(f.store), f.store.data());
  return finished(n, out, capacity);
}

bool retries_on_append_only_file(int error, int flags, int rewritten) {
  return error == EPERM && rewritten != flags && (rewritten & O_APPEND) && !(rewritten & O_TRUNC);
}

size_t format_append_only_refusal(const AppendOnlyRefusal& f, char* out, size_t capacity) {
  if (capacity == 0) return 0;
  const int n = std::snprintf(
      out, capacity,
      "%s(\"%.*s\", %.*s) failed with EPERM: the file has the kernel's append-only attribute (chattr +a), "
      "which refuses truncating it or writing it without O_APPEND; nothing can replace it while the "
      "attribute is set: write under a new name (appendguard opens such a file with O_APPEND when the "
      "program only adds to it); see docs/limits.md",
      f.call, length(f.path), f.path.data(), length(f.flags), f.flags.data());
  return finished(n, out, capacity);
}

bool notes_refused_rename(int error, bool either_path_on_store) {
  return either_path_on_store &&
         (error == EPERM || error == EOPNOTSUPP || error == ENOSYS || error == EACCES ||
          error == EIO);  // HDFS FUSE mounts answer a rename onto an existing file with EIO
}

size_t format_refused_rename(const RefusedRename& f, char* out, size_t capacity) {
  if (capacity == 0) return 0;
  if (f.append_only_target) {
    const int n = std::snprintf(
        out, capacity,
        "%s(\"%.*s\", \"%.*s\") failed with %s: the target has the kernel's append-only attribute "
        "(chattr +a), which refuses replacing it (rsync and safetensors' save_file publish a file by "
        "renaming a temporary one onto its name); nothing can replace it while the attribute is set: write "
        "under a new name; both files are as they were; see docs/limits.md",
        f.call, length(f.old_path), f.old_path.data(), length(f.new_path), f.new_path.data(),
        linux_errno_name(f.error));
    return finished(n, out, capacity);
  }
  const int n = std::snprintf(
      out, capacity,
      "%s(\"%.*s\", \"%.*s\") failed with %s: the store (%.*s) refused the rename (rsync and safetensors' "
      "save_file publish a file by renaming a temporary one onto its name); on a store without rename "
      "(mountpoint-s3, Databricks volumes) appendguard carries out the rename of a file this process wrote "
      "there, not of one another process or an earlier run wrote; on a store that cannot rename onto an "
      "existing file (fuse_dfs) remove the target first; else write the file under its final name "
      "directly, or on a local disk and copy it; both files are as they were; see docs/stores.md",
      f.call, length(f.old_path), f.old_path.data(), length(f.new_path), f.new_path.data(),
      linux_errno_name(f.error), length(f.store), f.store.data());
  return finished(n, out, capacity);
}

bool ToldFiles::first_time(uint64_t key) {
  if (key == 0) key = 1;  // 0 marks a free slot
  for (std::atomic<uint64_t>& slot : keys_) {
    uint64_t seen = slot.load(std::memory_order_acquire);
    if (seen == key) return false;
    if (seen == 0) {
      uint64_t expected = 0;
      if (slot.compare_exchange_strong(expected, key, std::memory_order_acq_rel)) return true;
      if (expected == key) return false;
    }
  }
  keys_[next_replaced_.fetch_add(1, std::memory_order_relaxed) % kCapacity].store(key,
                                                                                  std::memory_order_release);
  return true;
}

namespace {

// FNV-1a: only equality of keys matters.
constexpr uint64_t kFnvBasis = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t add_byte(uint64_t hash, unsigned char byte) {
  return (hash ^ byte) * kFnvPrime;
}

}  // namespace

uint64_t file_key(dev_t device, ino_t inode) {
  uint64_t hash = kFnvBasis;
  for (uint64_t part : {static_cast<uint64_t>(device), static_cast<uint64_t>(inode)}) {
    for (int i = 0; i < 8; ++i) hash = add_byte(hash, static_cast<unsigned char>(part >> (i * 8)));
  }
  return hash;
}

uint64_t path_key(std::string_view path) {
  uint64_t hash = kFnvBasis;
  for (char c : path) hash = add_byte(hash, static_cast<unsigned char>(c));
  return hash;
}

}  // namespace appendguard
