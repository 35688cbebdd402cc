// Children started by glibc's own spawn: system() and popen() clone with glibc's internal posix_spawn,
// which our posix_spawn hook (hooks_exec.cpp) does not see. The child holds copies of the held
// descriptors and closes them at its exec (they are close-on-exec), a FLUSH that rclone takes as the end
// of the upload: the sessions held now are no longer reused (held_sessions.h, note_child_started). The
// new program gets no carried descriptors from these (docs/limits.md): in trace mode, one line per
// guarded descriptor says so. Nothing is done in a process that holds and tracks nothing: two loads.
#include <stdio.h>
#include <stdlib.h>

#include "shim/held_sessions.h"
#include "shim/hook.h"
#include "shim/trace.h"

using namespace appendguard;

namespace {

void trace_uncarried(const char* operation, long long result, int error) {
  keep_errno([&](int) {
    int highest = g_files.highest_fd();
    for (int fd = g_files.next_slot(0, highest); fd <= highest; fd = g_files.next_slot(fd + 1, highest)) {
      if (const Description* d = g_files.lookup(fd)) {
        trace(operation, fd, d->path, result, error, "%s",
              "not carried: the child's program does not guard it");
      }
    }
  });
}

}  // namespace

APPENDGUARD_HOOK int system(const char* command) {
  // Even system(NULL) starts a shell in glibc ("exit 0"), so it counts too.
  if (__builtin_expect(any_held_sessions(), 0)) note_child_started();
  int result = real_system(command);
  if (__builtin_expect(g_files.any_tracked(), 0) && tracing()) trace_uncarried("system", result, errno);
  return result;
}

APPENDGUARD_HOOK FILE* popen(const char* command, const char* type) {
  if (__builtin_expect(any_held_sessions(), 0)) note_child_started();
  FILE* stream = real_popen(command, type);
  if (__builtin_expect(g_files.any_tracked(), 0) && tracing()) {
    trace_uncarried("popen", stream ? 0 : -1, stream ? 0 : errno);
  }
  return stream;
}
