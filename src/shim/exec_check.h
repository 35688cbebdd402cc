// An exec that leaves guarded descriptors unchecked (issue 24, "documented, still silent"): the new program
// is statically linked (no dynamic loader, so no LD_PRELOAD) or set-uid/set-gid (the loader ignores
// LD_PRELOAD), and it inherits descriptors of guarded files. Said in one line before the exec, the last
// point where the library can see it coming.
#pragma once

#include <cstddef>

namespace appendguard {

// `path` as given to execve/execv (a name without '/' is not looked up in PATH). Cheap when no guarded
// descriptor survives the exec.
void say_if_exec_leaves_guarded_descriptors(const char* operation, const char* path);

// Third adversarial round: the program dropped the library from the environment it gives the new program
// (unsetenv("LD_PRELOAD"), clearenv(), environ = NULL, APPENDGUARD unset or off) while guarded descriptors
// survive the exec: the new program does not check them, and a descriptor whose O_RDWR open was rewritten
// is O_APPEND in the kernel (a write at its position 0 appended, silently). Said in one line. `envp`:
// the environment the new program gets (`entries` entries). A new program that inherits no guarded
// descriptor is not said (docs/limits.md).
void say_if_new_environment_drops_the_library(const char* operation, char* const* envp, size_t entries);
// At start-up: the LD_PRELOAD entry that loaded this library, if one did.
void remember_preload_entry();

}  // namespace appendguard
