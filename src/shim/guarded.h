// The tracked path of every descriptor hook of interposed.def (INTERPOSED_FD rows): `guarded::NAME`, with
// the hook's own parameters, called by the generated untracked path (hooks_fast_path.cpp) when the
// descriptor's table slot is taken. Each is defined in the hooks_*.cpp file of its kind.
#pragma once

#include "core/file_table.h"
#include "shim/real_io.h"

namespace appendguard::guarded {

// The tracked path gets the description the untracked path found first, then the hook's own parameters.
#define APPENDGUARD_WITH_DESCRIPTION(...) (::appendguard::Description * d, __VA_ARGS__)
#define APPENDGUARD_PASS_DESCRIPTION(...) (d, __VA_ARGS__)
#define INTERPOSED_FD(name, kind, twin64, fd, ret, params, args) ret name APPENDGUARD_WITH_DESCRIPTION params;
#include "shim/interposed.def"

}  // namespace appendguard::guarded
