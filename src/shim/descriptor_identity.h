// Which file and which open file description a descriptor is, whatever its name or number (issue 24):
// a write open of a file this process tracks under another name, an open in a child that shares our
// memory, and descriptors received over a unix socket (our own description sent to ourselves, or a
// rewritten one from another process).
#pragma once

#include <sys/socket.h>

#include "shim/runtime.h"

namespace appendguard {

// A write open of a file this process already tracks is guarded whatever its name (a hard link or a
// symlink with an unguarded name, /proc/self/fd/N): appends through that name would otherwise leave the
// tracked end of file stale. Fills `full_path` (kMaxPath) with the name as opened, made absolute. One
// relaxed load when no file is tracked; else a stat of the name and a look at the table's files.
bool opens_a_tracked_file_slow(int dirfd, const char* path, char* full_path);
inline bool opens_a_tracked_file(int dirfd, const char* path, char* full_path) {
  return __builtin_expect(g_files.any_live_file(), 0) && opens_a_tracked_file_slow(dirfd, path, full_path);
}

// A write open of a guarded file in a child that shares our memory (vfork, clone(CLONE_VM|CLONE_VFORK),
// a raw clone with CLONE_VM is refused by the system-call layer, syscall_dispatch.cpp): such a child cannot
// have a table of its own, and ours is its parent's. True when this is such a child: the open is then left
// exactly as asked (never rewritten into an append nobody tracks) and one line says so.
bool open_in_child_sharing_memory(const char* function, const char* full_path);

// Descriptors received over a unix socket (SCM_RIGHTS): one that is an open file description this
// process tracks (its own descriptor sent to itself, or back to it) shares that description; another
// guarded one is adopted as the kernel shows it, and an O_APPEND one from another process is said once
// (what that process asked for is not known here).
void receive_descriptors(const char* operation, const msghdr* message);

// Whether descriptors `a` and `b` of this process are the same open file description.
bool same_open_description(int a, int b);

}  // namespace appendguard
