// vfork. The child runs on the parent's stack, in the parent's memory, until it execs or exits; a C
// wrapper of ours would return into a frame the child has already used and left changed. So the hook is
// a stub that calls one function of ours *before* the real vfork, in the parent, on an intact stack, and
// then jumps to the real vfork, which returns (twice) straight into the program, as if it had been called
// by the program itself (no frame of ours is left on the stack; calls and returns stay balanced for a
// shadow stack).
//
// What that function does: a vfork child ends by exec (its close-on-exec copies of the held descriptors
// are closed) or by _exit (all are closed); either close is a FLUSH, which rclone takes as the end of the
// upload. So every vfork is a child started (held_sessions.h, note_child_started), whether or not the
// child execs: before, only an exec in the child was seen, and a child that _exits without exec was
// missed (docs/limits.md).
#include "shim/held_sessions.h"
#include "shim/hook.h"
#include "shim/runtime.h"
#include "shim/trace.h"

using namespace appendguard;

extern "C" {

// Returns the real vfork for the stub to jump to. errno is kept: the program sees vfork's own.
__attribute__((visibility("hidden"), used)) void* appendguard_before_vfork() {
  int error = errno;
  if (__builtin_expect(any_held_sessions(), 0)) note_child_started();
  if (__builtin_expect(g_files.any_tracked(), 0) && current_mode() != Mode::kOff && tracing())
    trace("vfork", -1, "", 0, 0, "%s", "a child process: the sessions held now are not reused");
  // The libc functions the child's exec calls, found here rather than by a dlsym in the child, which
  // shares our memory and the loader's lock with the threads of ours that keep running (once found, three
  // loads).
  resolve_exec_functions();
  void* real = reinterpret_cast<void*>(real_vfork.get());
  errno = error;
  return real;
}

}  // extern "C"

#if !defined(__x86_64__)
#error "the vfork stub is written for x86-64"
#endif

#if defined(__CET__) && (__CET__ & 1)
#define APPENDGUARD_ENDBR "  endbr64\n"
#else
#define APPENDGUARD_ENDBR ""
#endif

// vfork: exported by the version script (interposed.def). The stack is 16-byte aligned for the call, and
// restored exactly before the jump, so the real vfork finds the program's return address on top.
asm(".text\n"
    ".globl vfork\n"
    ".type vfork, @function\n"
    "vfork:\n" APPENDGUARD_ENDBR
    "  sub $8, %rsp\n"
    "  call appendguard_before_vfork\n"
    "  add $8, %rsp\n"
    "  jmp *%rax\n"
    ".size vfork, .-vfork\n");
