// An exec that leaves guarded descriptors unchecked (issue 24, "documented, still silent"): the new program
// is statically linked (no dynamic loader, so no LD_PRELOAD) or set-uid/set-gid (the loader ignores
// LD_PRELOAD), and it inherits descriptors of guarded files. Said in one line before the exec, the last
// point where the library can see it coming.
#pragma once

namespace appendguard {

// `path` as given to execve/execv (a name without '/' is not looked up in PATH). Cheap when no guarded
// descriptor survives the exec.
void say_if_exec_leaves_guarded_descriptors(const char* operation, const char* path);

}  // namespace appendguard
