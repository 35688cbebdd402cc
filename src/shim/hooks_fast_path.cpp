// The untracked path of every descriptor hook of interposed.def (INTERPOSED_FD rows): one load of the
// descriptor's table slot, then a tail call to libc; a taken slot goes to `guarded::NAME` (guarded.h).
#include "shim/guarded.h"
#include "shim/hook.h"

using namespace appendguard;

#define INTERPOSED_FD(name, kind, twin64, fd, ret, params, args)                                    \
  APPENDGUARD_HOOK ret name params {                                                                \
    if (__builtin_expect(::appendguard::g_files.lookup(fd) == nullptr, 1)) return real_##name args; \
    return guarded::name args;                                                                      \
  }
#include "shim/interposed.def"
