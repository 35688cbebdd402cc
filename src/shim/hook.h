// What every hook file needs: the export attribute, the runtime, the guarded operations, the real calls.
#pragma once

#include <errno.h>

#include "shim/guard.h"
#include "shim/real_io.h"
#include "shim/runtime.h"

// Hooks are the library's only exported symbols (see exports.map).
#define APPENDGUARD_HOOK extern "C" __attribute__((visibility("default")))

// A hook on a descriptor: the untracked path tests one table slot and tail-calls libc; everything else is
// in `guarded_NAME`, a separate out-of-line function with the same parameters, written after the macro:
//   APPENDGUARD_FD_HOOK(ssize_t, write, fd, (int fd, const void* buf, size_t n), (fd, buf, n)) { ... }
#define APPENDGUARD_FD_HOOK(ret, name, fd, params, args)                                            \
  static __attribute__((noinline)) ret guarded_##name params;                                       \
  APPENDGUARD_HOOK ret name params {                                                                \
    if (__builtin_expect(::appendguard::g_files.lookup(fd) == nullptr, 1)) return real_##name args; \
    return guarded_##name args;                                                                     \
  }                                                                                                 \
  static ret guarded_##name params

namespace appendguard {

// Calls `note` after `result` was obtained, keeping the errno the program must see.
template <typename Note>
inline void keep_errno(Note&& note) {
  int error = errno;
  note(error);
  errno = error;
}

}  // namespace appendguard
