// A store refused a call on a descriptor whose open appendguard changed: the program did not ask for
// those flags, so it hears why it fails, once per description, with the setting that fits the store.
#pragma once

#include "core/file_table.h"

namespace appendguard {

// What a notice about a refused call needs of the description, copied while it is still ours.
struct RefusedCall {
  const char* path;
  int original_flags;
  int effective_flags;
  bool reused_session;

  static RefusedCall of(const Description* d) {
    return {d->path, d->site.original_flags, d->site.effective_flags, d->reused_session};
  }
};

// Whether appendguard changed the flags of the open that made `d`.
inline bool rewritten_open(const Description* d) {
  return d->site.original_flags != d->site.effective_flags;
}

// The notice itself (close_tracked calls it with what it copied before the description was recycled).
void explain_store_refusal(const char* operation, int fd, const RefusedCall& call, int error);

// A guarded call failed with `error`: on a descriptor whose open appendguard changed, a store's refusal
// is explained once. Leaves errno = error.
void note_failed_guarded_call(const char* operation, int fd, Description* d, int error);

// A guarded write open (of absolute `path`, with the `flags` passed on as the program asked) failed with
// `error`: when the file is on a FUSE or append-only mount and the error is a store's refusal, said once
// per file (appendonlyfs strict refuses an O_TRUNC open of an existing file). Leaves errno = error.
[[gnu::cold, gnu::noinline]] void note_refused_guarded_open(const char* function, const char* path, int flags,
                                                            int error);

// A rename (rename, renameat, renameat2, or the raw system call) failed with `error`: when it is a
// store's refusal and either path is on a FUSE or append-only mount, one line naming both paths, the
// store, the error and that appendguard does not carry renames out on such a store (issue 26). Once per
// target file. Leaves errno = error. The rename hooks call it on their failure path only.
[[gnu::cold, gnu::noinline]] void note_refused_rename(const char* function, int olddirfd, const char* oldpath,
                                                      int newdirfd, const char* newpath, int error);

// truncate(path, length) of a file no pattern or mount guards failed with `error`: when it is EPERM on a
// file with the kernel's append-only attribute (chattr +a), one line says so, once per file (an open of
// such a file is explained the same way). Leaves errno = error.
[[gnu::cold, gnu::noinline]] void note_refused_truncate(const char* function, const char* path,
                                                        long long length, int error);

}  // namespace appendguard
