// Everything else on a tracked descriptor: duplicates, closes, flags, reads and mappings. These keep the
// file table in step with the kernel's descriptors; only reads and mappings can be violations.
#pragma once

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include "core/file_table.h"
#include "shim/real_io.h"
#include "shim/runtime.h"

namespace appendguard {

void note_duplicate(const char* operation, int old_fd, int new_fd);
void note_close(int fd);
// close() of a tracked descriptor: forget it, close it, trace the real result.
int close_tracked(int fd);
// A descriptor number the kernel just handed out for something we do not guard: if we still track that
// number, it was closed behind our back (a raw syscall, glibc closing internally) and is forgotten.
inline int forget_if_stale(int fd) {
  if (__builtin_expect(g_files.slot(fd) != nullptr, 0)) note_close(fd);  // also a held number's mark
  return fd;
}
void note_close_range(const char* operation, unsigned first, unsigned last);
// Each tracked descriptor (lowest first, the held numbers' marks skipped) whose close-on-exec flag, as the
// kernel has it now, is `close_on_exec`: those an exec closes, or those it leaves to the new program. No
// lock taken: this may run in a vfork child.
template <typename Each>
void for_each_tracked_by_close_on_exec(bool close_on_exec, Each&& each) {
  const int highest = g_files.highest_fd();
  for (int fd = g_files.next_slot(0, highest); fd <= highest; fd = g_files.next_slot(fd + 1, highest)) {
    Description* d = g_files.lookup(fd);
    if (!d) continue;
    const long flags = real_syscall(SYS_fcntl, fd, F_GETFD);
    if (flags >= 0 && ((flags & FD_CLOEXEC) != 0) == close_on_exec) each(fd, d);
  }
}
// A tracked descriptor that goes away without our close: dup2/dup3 onto its number, close_range/closefrom
// over it (note_close_range), close-on-exec at an exec. What the program's close would do before the real
// close is done now: a deferred preallocation's zeros (its file's last descriptor), a spooled file's upload,
// a file closed on a store remembered for its rename. Before (third adversarial round) the file stayed at
// the program's bytes (10 of the 8192 an ftruncate promised) and a spooled file never reached the store.
void finish_before_implicit_close(int fd);
// At an exec by the process itself: the same for each tracked close-on-exec descriptor.
void finish_close_on_exec_descriptors();
// F_SETFL: O_APPEND cannot be cleared on a descriptor we made append-only. Returns the flags to set.
int setfl_flags(Description* d, int requested);
void note_setfl(int fd, Description* d, int requested, int applied, int result);

void note_read(const char* operation, int fd, Description* d, bool moves_position, ssize_t result, int error);
void note_mmap(const char* operation, int fd, Description* d, int prot, int flags, bool failed, int error);

}  // namespace appendguard
