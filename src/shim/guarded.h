// The tracked path of every descriptor hook of interposed.def (INTERPOSED_FD rows): `guarded::NAME`, with
// the hook's own parameters, called by the generated untracked path (hooks_fast_path.cpp) when the
// descriptor's table slot is taken. Each is defined in the hooks_*.cpp file of its kind.
#pragma once

#include "shim/real_io.h"

namespace appendguard::guarded {

#define INTERPOSED_FD(name, kind, twin64, fd, ret, params, args) ret name params;
#include "shim/interposed.def"

}  // namespace appendguard::guarded
