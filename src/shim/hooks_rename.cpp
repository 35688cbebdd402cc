// rename, renameat, renameat2: seen and traced when either name is guarded, then performed unchanged, and
// a refusal by a store without rename said in one line
// (the libc calls here, and the raw system calls through the system call layer, syscall_dispatch.cpp).
// On a store without rename, a rename of a file this process wrote is carried out (shim/spool.h).
#include <stdio.h>

#include "report/site_stack.h"
#include "shim/guarded_paths.h"
#include "shim/hook.h"
#include "shim/path_scratch.h"
#include "shim/spool.h"
#include "shim/store_refusal.h"
#include "shim/syscall_dispatch.h"
#include "shim/trace.h"

using namespace appendguard;

namespace {

// Out of line: only a traced process with a guarded name pays for the two path buffers.
template <typename Real>
[[gnu::noinline]] int rename_traced(const char* operation, int old_dirfd, const char* old_path, int new_dirfd,
                                    const char* new_path, unsigned flags, Real&& real) {
  PathLease lease(2);  // not on the stack (shim/path_scratch.h): a program's thread may have 16 KiB in all
  char* old_full = lease.get(0);
  char* new_full = lease.get(1);
  if (!old_full || !new_full) return real();
  bool old_guarded = guarded_path_at(old_dirfd, old_path, old_full);
  bool new_guarded = guarded_path_at(new_dirfd, new_path, new_full);
  int result = real();
  if (old_guarded || new_guarded) {
    keep_errno([&](int error) {
      InternalScope internal;
      trace(operation, -1, old_guarded ? old_full : old_path, result, error, "to %s flags=%#x%s",
            new_guarded ? new_full : new_path, flags,
            raw_system_call_in_progress() ? " (raw system call)" : "");
    });
  }
  return result;
}

template <typename Real>
[[gnu::always_inline]] inline int rename_hook(const char* operation, int old_dirfd, const char* old_path,
                                              int new_dirfd, const char* new_path, unsigned flags,
                                              Real&& real) {
  if (__builtin_expect(current_mode() == Mode::kOff, 1) || InternalScope::active()) return real();
  int result = 0;
  // A spooled source is not on the store: its rename is its upload under the target name (issue 26).
  // The store paths below copy files and say why they failed with path-sized messages: on the thread's
  // site stack (report/site_stack.h), since the program's thread may have 16 KiB in all (a rename on a
  // store without one died of SIGSEGV there: e2e.test_small_stacks).
  if (__builtin_expect(any_spooled(), 0)) {
    if (run_on_site_stack(
            [&] { return rename_spooled_source(old_dirfd, old_path, new_dirfd, new_path, flags, result); }))
      return result;
  }
  result =
      tracing() ? rename_traced(operation, old_dirfd, old_path, new_dirfd, new_path, flags, real) : real();
  // A store without rename refusing it: carried out for a file this process wrote (copied on the store),
  // else said (issue 23: the quiet cells of rsync and safetensors' save on appendonlyfs hdfs and s3).
  if (__builtin_expect(result < 0, 0)) {
    const int error = errno;
    run_on_site_stack([&] {
      if (!carry_out_refused_rename(old_dirfd, old_path, new_dirfd, new_path, flags, error, result))
        note_refused_rename(operation, old_dirfd, old_path, new_dirfd, new_path, error);
    });
  }
  return result;
}

// Out of line, as rename_traced: only a traced process pays for the path buffer.
template <typename Real>
[[gnu::noinline]] int unlink_traced(const char* operation, int dirfd, const char* path, int flags,
                                    Real&& real) {
  PathLease lease(1);  // not on the stack, as rename_traced's
  char* full = lease.get(0);
  if (!full) return real();
  const bool guarded = guarded_path_at(dirfd, path, full);
  int result = real();
  if (guarded) {
    keep_errno([&](int error) {
      InternalScope internal;
      trace(operation, -1, full, result, error, "flags=%#x%s", flags,
            raw_system_call_in_progress() ? " (raw system call)" : "");
    });
  }
  return result;
}

}  // namespace

// unlink, unlinkat: the name of a spooled file is not on the store (shim/spool.h): forgotten, so that its
// close uploads nothing. Traced when the name is guarded.
template <typename Real>
int unlink_hook(const char* operation, int dirfd, const char* path, int flags, Real&& real) {
  if (__builtin_expect(current_mode() == Mode::kOff, 1) || InternalScope::active()) return real();
  if (__builtin_expect(any_spooled(), 0) && !(flags & AT_REMOVEDIR) && unlink_spooled_name(dirfd, path)) {
    if (tracing()) {
      InternalScope internal;
      trace(operation, -1, path, 0, 0, "%s",
            "a spooled file's name: forgotten, nothing uploaded at its close");
    }
    return 0;
  }
  return tracing() ? unlink_traced(operation, dirfd, path, flags, real) : real();
}

APPENDGUARD_HOOK int unlink(const char* path) {
  return unlink_hook("unlink", AT_FDCWD, path, 0, [&] { return real_unlink(path); });
}

APPENDGUARD_HOOK int unlinkat(int dirfd, const char* path, int flags) {
  return unlink_hook("unlinkat", dirfd, path, flags, [&] { return real_unlinkat(dirfd, path, flags); });
}

APPENDGUARD_HOOK int rename(const char* old_path, const char* new_path) {
  return rename_hook("rename", AT_FDCWD, old_path, AT_FDCWD, new_path, 0,
                     [&] { return real_rename(old_path, new_path); });
}

APPENDGUARD_HOOK int renameat(int old_dirfd, const char* old_path, int new_dirfd, const char* new_path) {
  return rename_hook("renameat", old_dirfd, old_path, new_dirfd, new_path, 0,
                     [&] { return real_renameat(old_dirfd, old_path, new_dirfd, new_path); });
}

APPENDGUARD_HOOK int renameat2(int old_dirfd, const char* old_path, int new_dirfd, const char* new_path,
                               unsigned int flags) {
  return rename_hook("renameat2", old_dirfd, old_path, new_dirfd, new_path, flags,
                     [&] { return real_renameat2(old_dirfd, old_path, new_dirfd, new_path, flags); });
}
