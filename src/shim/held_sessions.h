// Held write sessions, the hook side (the policy is core/held_files.h; the choices are in docs/design.md,
// "Held write sessions"). Every entry point here is reached only for a descriptor or path that already
// matched a guard, or behind any_held_sessions(), one relaxed load that is false in every process that
// holds nothing.
#pragma once

#include <atomic>

#include "core/held_files.h"
#include "core/hidden.h"
#include "shim/runtime.h"

namespace appendguard {

extern APPENDGUARD_HIDDEN constinit std::atomic<int> g_held_count;

inline bool any_held_sessions() {
  return g_held_count.load(std::memory_order_relaxed) != 0;
}

// Whether files opened for writing on a store of `kind` (MountTable::facts_of, looked up once per open)
// start held sessions (APPENDGUARD_REOPEN=hold, or auto on a write-once store). Inline, as reopen_choice
// is: every guarded open asks.
inline bool hold_mode_for(StoreKind kind) {
  return reopen_choice(g_config->reopen, kind) == ReopenChoice::kHold;
}

// The program closes `fd`, tracked as `d`: if the session is to be held, forgets the descriptor for the
// program, keeps it open (close-on-exec) and returns true; the program's close then returns 0. On a store
// that ends an upload at FLUSH, a descriptor of a file the library wrote anew or holds a session of that
// is not the file's last here is *parked* instead (kept open under its number, closed for the program)
// until the file's last descriptor here is really closed (close_parked_numbers).
bool hold_instead_of_close(int fd, Description* d);
// After a real close of a guarded descriptor (and a held session's commit): the parked numbers of files
// no longer open here are really closed. One relaxed load when none is parked.
void close_parked_numbers();

// A write open of a file (device, inode): if a session of it is held, takes it out of the set into `out`
// and returns true when the open is to be answered with it; a session that cannot be reused by this open
// (a truncating open) is committed first and false is returned.
// Only what the open needs of the session: a HeldSession holds a 4 KiB path, and decide_open runs on
// every write open, on whatever stack the program's thread has (issue 24, item 6).
struct HeldReuse {
  int fd = -1;
  uint64_t end_of_file = 0;
  int effective_flags = 0;
};
bool take_held_for_open(dev_t device, ino_t inode, int flags, HeldReuse& out);

// A held session of file (device, inode), if there is one, is committed (`when` for its report); true if
// there was one (a rename the store refused of a file this process wrote and closed: shim/spool.h).
bool commit_held_file(dev_t device, ino_t inode, const char* when);

// A read-only open of a guarded path: a held session of the file is committed first, so that the reader
// sees its bytes.
void commit_held_before_read(int dirfd, const char* path);

// A held number's slot in the file table is FileTable::closed_by_program() from the program's close
// until the real close: every hook that tests the slot (the generated descriptor hooks, close, dup,
// dup2/dup3's old number, fcntl) answers EBADF there, as the kernel would without the library.
// wait_while_committing: the committer thread may be closing `fd` right now (its slot is cleared just
// after the real close): waits for that close and returns true when the slot is to be looked at again;
// false: the number is one the program closed and we hold (EBADF).
bool wait_while_committing(int fd);
// Whether `fd` is a number the program closed and we hold (after waiting out a commit in flight).
bool closed_by_the_program(int fd);
// The same for hooks whose lookup() found no description (stdio's fdopen and dprintf): one slot test.
inline bool closed_number(int fd) {
  return __builtin_expect(g_files.closed_by_program_at(fd), 0) && closed_by_the_program(fd);
}
// close() of a number whose slot is taken: a tracked descriptor's close, or EBADF for a number we hold
// (a second close: the session stays). Out of line, so that close's own path stays a tail call.
int close_taken_number(int fd);
// dup2/dup3 onto a held number, close_range and closefrom over held numbers: the sessions are committed
// first, and a commit of one of those numbers by the committer thread is waited for.
// Parked numbers in the range are really closed too (`parked_too`), as the kernel is about to reuse them.
void commit_held_range(unsigned first, unsigned last, const char* when, bool parked_too = true);
// The first open that starts a session to be held (finish_open) starts the committer thread (the
// APPENDGUARD_HOLD_SECONDS limit), outside the program's close, which may run in a signal handler.
void start_held_committer();

// At exit and before exec: every session is committed (the program's files are complete). At exit the
// committer thread (the APPENDGUARD_HOLD_SECONDS limit) is stopped and
// a commit it has in flight waited for; closes after it are not held.
void commit_all_held(const char* when);
void commit_held_at_exit();
// In a fork child: the parent's sessions are the parent's.
void forget_held_after_fork_child();
// A child process was started (fork in the parent, posix_spawn, system, popen, exec in a vfork child;
// hooks_exec.cpp, hooks_spawn.cpp): it holds copies
// of the held descriptors, and its close of them (at exec for close-on-exec ones, at exit for all) is a
// FLUSH that a write-once store takes as the end of the upload (rclone does). Sessions held before this
// are therefore not reused: the next write open commits them and writes the file anew.
void note_child_started();

}  // namespace appendguard
