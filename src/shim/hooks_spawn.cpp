// Children started by glibc's own spawn: system() and popen() clone with glibc's internal posix_spawn,
// which our posix_spawn hook (hooks_exec.cpp) does not see. The child holds copies of the held
// descriptors and closes them at its exec (they are close-on-exec), a FLUSH that rclone takes as the end
// of the upload: the sessions held now are no longer reused (held_sessions.h, note_child_started). The
// new program gets no carried descriptors from these (docs/limits.md). Nothing is done in a process that
// holds nothing: one relaxed load.
#include <stdio.h>
#include <stdlib.h>

#include "shim/held_sessions.h"
#include "shim/hook.h"

using namespace appendguard;

APPENDGUARD_HOOK int system(const char* command) {
  // Even system(NULL) starts a shell in glibc ("exit 0"), so it counts too.
  if (__builtin_expect(any_held_sessions(), 0)) note_child_started();
  return real_system(command);
}

APPENDGUARD_HOOK FILE* popen(const char* command, const char* type) {
  if (__builtin_expect(any_held_sessions(), 0)) note_child_started();
  return real_popen(command, type);
}
