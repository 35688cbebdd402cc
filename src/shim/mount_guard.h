// Whole-mount guarding (APPENDGUARD_FS): on a mount known to be append-only or write-once, every file
// opened for writing is guarded, whatever its name. The mount table is read once, when the library is
// enabled; a lookup is a string comparison per mount, and none at all when no mount is append-only.
#pragma once

#include "core/mount_table.h"

namespace appendguard {

// Reads /proc/self/mountinfo (called while initializing, inside our own scope).
void load_mount_table();

extern const MountTable* g_mount_table;  // null when no mount is append-only

// The append-only mount holding `full_path` (absolute, normalized), or null.
inline const MountEntry* append_only_mount_of(const char* full_path) {
  return g_mount_table ? g_mount_table->append_only_mount_of(full_path) : nullptr;
}
// The kind of store holding `full_path` (absolute, normalized); kAppends when no mount is known.
inline StoreKind store_kind_of(const char* full_path) {
  return g_mount_table ? g_mount_table->store_kind_of(full_path) : StoreKind::kAppends;
}
inline bool any_append_only_mount() {
  return g_mount_table != nullptr;
}

}  // namespace appendguard
