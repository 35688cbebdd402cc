// The tracked path of every descriptor hook of interposed.def (INTERPOSED_FD rows): `guarded::NAME`, with
// the hook's own parameters, called by the generated untracked path (hooks_fast_path.cpp) when the
// descriptor's table slot is taken. Each is defined in the hooks_*.cpp file of its kind.
#pragma once

#include "core/file_table.h"
#include "shim/real_io.h"

namespace appendguard::guarded {

// The tracked path gets the hook's own parameters, then the description the untracked path found: last,
// so that the hook's arguments stay in their registers for the tail call.
#define APPENDGUARD_WITH_DESCRIPTION(...) (__VA_ARGS__, ::appendguard::Description * d)
#define APPENDGUARD_PASS_DESCRIPTION(...) (__VA_ARGS__, d)
#define INTERPOSED_FD(name, kind, twin64, fd, ret, params, args) ret name APPENDGUARD_WITH_DESCRIPTION params;
#include "shim/interposed.def"

}  // namespace appendguard::guarded
