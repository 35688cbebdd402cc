// Renames on stores without rename (issue 26; the decisions are core/rename_plan.h, the choices
// docs/design.md, "Renames on stores without rename"). A file the program creates with O_CREAT|O_EXCL
// on such a store (safetensors' .tmpXXXXXX) is written to an anonymous local spool file
// (APPENDGUARD_SPOOL) and uploaded once, sequentially, under the final name at its rename (or under its
// own name at its last close, or at exit). A rename of a file this process wrote on the store itself
// (DCP's .metadata.tmp, closed first) is carried out by copying it on the store. Both uploads run in a
// child process that shares our memory and outlives a SIGKILL of the writer, so that a rename the
// program began completes, and the final name never holds a partial file from a killed writer.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include "core/file_table.h"
#include "core/hidden.h"

namespace appendguard {

struct OpenRequest;
struct OpenDecision;

// Files spooled or uploaded from a spool by this process: false (one relaxed load) in every process that
// never created a file with O_EXCL on a store without rename.
extern APPENDGUARD_HIDDEN constinit std::atomic<int> g_spool_entries;
inline bool any_spooled() {
  return g_spool_entries.load(std::memory_order_relaxed) != 0;
}

// decide_open's choice for a name that does not exist yet (an existing one answers O_EXCL with EEXIST, and
// is not asked about): the open is of a new file (O_CREAT|O_EXCL) on a store without rename.
bool spools(const OpenRequest& request, const OpenDecision& decision);
// The program's open answered with a spool file (EEXIST when the store has the name): the descriptor, or
// -1 with errno, or kOpenOnStore when the spool cannot be used (said in one line; decision.spool is
// cleared and the caller opens on the store as decided). `create(create_context, flags)` is the program's
// open of the name with other flags (its mode): it makes the empty placeholder under the name on the store.
constexpr int kOpenOnStore = -2;
int open_spooled(const OpenRequest& request, OpenDecision& decision, int (*create)(void*, int),
                 void* create_context);
// After the open was tracked: the spool file (its device and inode) is known by its store name.
void register_spooled(const char* store_path, dev_t device, ino_t inode);

// A growing resize (deferred) to `size` bytes of a guarded descriptor: false, with one line naming
// APPENDGUARD_SPOOL, when it is a spooled file and the spool has no room for it (the call then fails
// with ENOSPC, before anything reached the store).
bool spool_room_for(int fd, Description* d, uint64_t size);

// Whether `d` is a spooled file's description, and the line said when a write into it fails for want of
// space (store_refusal.cpp: once per description).
bool is_spooled(const Description* d);
void say_spool_full(const char* operation, int fd, const Description* d);

// The rename hooks. Returns true when the rename was carried out here (its result in `result`, errno
// set): a spooled source (before the real call), or, after the real call failed with `error`, a source
// this process wrote on a store that refused it.
bool rename_spooled_source(int old_dirfd, const char* old_path, int new_dirfd, const char* new_path,
                           unsigned flags, int& result);
bool carry_out_refused_rename(int old_dirfd, const char* old_path, int new_dirfd, const char* new_path,
                              unsigned flags, int error, int& result);

// unlink/unlinkat of a spooled file's name (not on the store): true, and its close uploads nothing (a
// temporary file removed before its close, as safetensors' tempfile does on an error).
bool unlink_spooled_name(int dirfd, const char* path);

// close_tracked: a file this process wrote on a store without rename is closed; remembered (the last 64),
// so that a rename of it that the store refuses is carried out (DCP's .metadata.tmp is fsync'ed, so its
// session is not held). Called only for a file not on a store that renames (d->store_renames != kYes).
void remember_closed_on_store(const Description* d);

// close_tracked: the last descriptor of a spooled file closes. Uploads it under its own name (never
// renamed) or again under its target (grown after the rename). Returns 0, or -1 with errno and a line.
int upload_spooled_at_close(int fd, Description* d);
// At exit: spooled files still open are uploaded as at their close.
void upload_spooled_at_exit();
// At start, in enforce mode: APPENDGUARD_SPOOL on a FUSE file system (a store) is refused with one line
// and exit status 2, as a wrong setting is (its files would be written to the store they are uploaded to).
void refuse_spool_on_a_store();
// In a fork child (its handler): the registry's lock, which another thread of the parent may have held.
void reset_spool_after_fork_child();

}  // namespace appendguard
