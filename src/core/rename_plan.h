// Renames on stores without rename (issue 26; docs/design.md, "Renames on stores without rename"): what an
// open of a new file there and a rename there become. Pure: the hooks give the facts.
#pragma once

#include <cstdint>

namespace appendguard {

// A write open with O_CREAT|O_EXCL (tempfile, safetensors' NamedTempFile, Python's "x" mode) of a file on
// a store without rename, in enforce mode: written to a local spool file and uploaded once, under the
// final name, at the rename (or under its own name at its last close). `spool_off`: APPENDGUARD_SPOOL=off.
bool spools_open(int flags, bool enforce, bool store_renames, bool spool_off);

// Where a rename's source comes from.
enum class RenameSource {
  kSpooled,  // a spool file of this process (the store has nothing under the source name)
  kWritten,  // a file this process wrote on the store (open here, or its write session held)
  kUnknown,  // anything else
};

enum class RenamePlan {
  kPassThrough,  // the real rename, and its result as it is
  kUpload,       // the spool's bytes written sequentially under the target name
  kCopy,         // the source read back and written under the target name, then the source unlinked
  kExplain,      // the store's error, with one line naming the store and what would make it work
};

struct RenameFacts {
  RenameSource source = RenameSource::kUnknown;
  bool store_renames = true;  // the store holding the source and target (core/mount_table.h)
  int error = 0;              // the real rename's errno (0: not tried, or it worked)
  unsigned flags = 0;         // renameat2's flags
};

// Before the real call: a spooled source is never on the store, so its rename is the upload.
// After it failed with `error`: a source this process wrote is carried out on a store without rename
// (ENOSYS, EPERM, EOPNOTSUPP there), and on any store that answers ENOSYS; RENAME_EXCHANGE and
// RENAME_WHITEOUT are never carried (nothing sequential does them).
RenamePlan plan_rename(const RenameFacts& facts);

// After a plain rename (`flags` 0) failed with `error` on a store that refuses a rename onto an existing file
// (its row: core/store_remedy.h removes_target_before_rename; fuse_dfs answers EIO, as libhdfs's
// hdfsRename does for FileSystem#rename's false): whether the existing regular file under the target name
// is removed and the rename made again (the replacement is then not atomic). Never for a directory, a
// RENAME_NOREPLACE or RENAME_EXCHANGE, nor for an error that is not such a refusal.
bool removes_target_and_retries(int error, unsigned flags, bool store_removes_target, bool source_is_file,
                                bool target_is_file);

// The bytes an upload writes: the spool's bytes, then zeros up to a size the program reserved with
// ftruncate/fallocate that the library deferred (the zeros its close would write).
constexpr uint64_t upload_size(uint64_t end_of_file, uint64_t reserved_size) {
  return reserved_size > end_of_file ? reserved_size : end_of_file;
}

// Free space the spool must have for a file of `size` bytes (0: unknown yet, at the open): the size plus
// a margin of 1/16 and at least 64 MiB left for everything else on that disk.
bool spool_has_room(uint64_t free_bytes, uint64_t size);

}  // namespace appendguard
