// What the library does for an operation on a store: the one pure function from an operation and a store's
// row (core/stores.def) to a remedy. The library passes on what the store does itself and uses a remedy
// only for what it refuses; the facts the library keeps per mount (core/mount_table.h MountFacts) are read
// from here, and docs/stores.md's table of remedies is generated from it.
#pragma once

#include <span>

#include "core/store_table.h"

namespace appendguard {

enum class StoreOperation {
  kWriteBelowEnd,    // a write below the end of the file
  kAppendExisting,   // an O_APPEND open of an existing file
  kReopenOwnFile,    // a write open keeping the bytes of a file this process created or truncated
  kReopenOtherFile,  // a write open keeping the bytes of a file this process did not write
  kShrink,           // truncation to a smaller size above 0
  kEmpty,            // truncation to 0
  kGrow,             // ftruncate up, fallocate
  kCreateToRename,   // an O_CREAT|O_EXCL create (a temporary file, renamed once written)
  kRenameNew,        // a rename to a new name
  kRenameOnto,       // a rename onto an existing file
};

enum class Remedy {
  kPassOn,             // the store does it: the call goes through as asked
  kAppendReopen,       // the open is made with O_APPEND, its writes kept at the end
  kHeldSession,        // the file's first write session is kept open across the close and reused
  kRewrite,            // the file is truncated and its bytes written back, then the writes follow
  kDeferredSize,       // the size is recorded and reached with zeros at the last close
  kSpool,              // written to a local spool file, uploaded once under its final name
  kCopyOnRename,       // the file is copied under the new name and the old one removed
  kRemoveTargetFirst,  // the existing target is removed, then renamed onto (not atomic: said once)
  kRefuse,             // refused loudly: one line says why and what would work
};

// The remedy for `operation` on the store of `row`.
Remedy remedy_for(StoreOperation operation, const StoreRow& row);

// Every operation, in enum order (for the tests and the generated documentation).
std::span<const StoreOperation> store_operations();
const char* store_operation_name(StoreOperation operation);
const char* remedy_name(Remedy remedy);

// What a mount's row means for the decisions the library keeps per mount (read once, when the mount table
// is loaded).
// Whether a reopen of a file this process wrote is a held session: the store takes no append to it
// (a write-once store: one sequential upload from 0 per file).
bool holds_sessions(const StoreRow& row);
// Whether the store renames (else an O_CREAT|O_EXCL create is spooled and a rename copied).
bool renames_files(const StoreRow& row);
// Whether a rename onto an existing file needs the target removed first.
bool removes_target_before_rename(const StoreRow& row);
// Whether the store refuses some write pattern (below the end, appends, a write open of an existing
// file): a store recognised by its mount is then guarded whole under APPENDGUARD_FS=known.
bool refuses_writes(const StoreRow& row);

}  // namespace appendguard
