// What every hook file needs: the export attribute, the runtime, the real calls. Each hooks_*.cpp file
// includes the guard of its own operations (guard_open.h, guard_write.h, guard_size.h, guard_descriptor.h).
#pragma once

#include <errno.h>

#include "shim/real_io.h"
#include "shim/runtime.h"

// Hooks are the library's only exported symbols (the rows of interposed.def; exports.map in the build
// tree is generated from it).
#define APPENDGUARD_HOOK extern "C" __attribute__((visibility("default")))

namespace appendguard {

// Calls `note` after `result` was obtained, keeping the errno the program must see.
template <typename Note>
inline void keep_errno(Note&& note) {
  int error = errno;
  note(error);
  errno = error;
}

}  // namespace appendguard
