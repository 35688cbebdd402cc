// Native backtraces through libunwind, which is dlopen'ed privately (RTLD_LOCAL) when first needed (the
// first open whose site is recorded, the first report or seek site): linked normally, libunwind.so.8
// would put its own _Unwind_* exception ABI ahead of libgcc_s in the host's global symbol scope. A process
// that never needs a stack never loads it (issue 27: it was most of a new process's start-up).
#pragma once

#include <atomic>
#include <cstdint>

#include "core/hidden.h"
#include "report/text_buffer.h"

namespace appendguard {

// Loads libunwind, on the site stack (report/site_stack.h). Safe to call more than once and from several
// threads (one loads, the others wait); returns false if it is not installed, or if this thread is
// loading it already (a signal handler that interrupted the loading). dlopen is not async-signal-safe:
// the caller makes sure this is not a signal handler nor a child sharing its parent's memory.
bool load_unwinder();
// Set once libunwind is loaded. Inline: every guarded open asks (issue 27: a call of its own).
extern APPENDGUARD_HIDDEN constinit std::atomic<bool> g_unwinder_loaded;
inline bool unwinder_loaded() {
  return g_unwinder_loaded.load(std::memory_order_acquire);
}
bool unwinder_unavailable();  // tried, and libunwind.so.8 could not be loaded
// In the child of fork: if another thread of the parent was inside libunwind (and may have held its
// locks), this process never unwinds.
void unwinder_after_fork_child();

struct CapturedStack {
  static constexpr int kMaxFrames = 256;
  void* frames[kMaxFrames];
  int count = 0;
  bool in_signal_handler = false;  // a signal frame was seen: do not allocate (no demangling)
  bool reached_bottom = false;     // frames[count - 1] is the thread's outermost frame
  int libc_frames_skipped = 0;     // StackScope::kCulprit: libc frames of the call, above frames[0]
  int frames_beyond = 0;           // frames below frames[count - 1] that were not kept (512 at most)
};

// kWhole: every frame from the program's call down (APPENDGUARD_TRACE=1). kCulprit: without the libc
// frames of the call at the top (fwrite's, fseek's way to our hook), so that frames[0] is the caller's.
enum class StackScope : bool { kWhole, kCulprit };

// Room for libunwind's context and cursor, kept off the stack (report/scratch.h).
constexpr size_t kUnwindSpace = 4096;

// Captures up to `max_frames` return addresses of the caller, skipping `skip` innermost frames and then
// every frame inside this library (and with kCulprit libc's), so that the first frame shown is the
// program's call. A stack that is all libc's is kept whole. `unwind_space` (kUnwindSpace bytes,
// 64-aligned) holds libunwind's state. `stop_at_python`: the first frame of CPython's evaluation loop is
// the last kept and the last stepped to (frames_beyond stays 0; a signal frame below it cannot matter).
void capture_stack(CapturedStack& stack, int max_frames, int skip, unsigned char* unwind_space,
                   StackScope scope = StackScope::kWhole, bool stop_at_python = false);

// Captures addresses only (for the site of an open, symbolized later if a report needs it): the frames
// from the first one outside this library (and with kCulprit outside libc) on, as capture_stack keeps
// them. A site this thread recorded before at the same stack address is read back from the stack
// (report/site_chains.h: a few instructions a frame); otherwise unwound, on a stack of its own
// (report/site_stack.h), so that the caller's stack grows by little more than a frame, and remembered.
// `cfa`: the canonical frame address of the open hook that leads here, every frame between it and this
// call being this library's (shim/guard_open.h OpenRequest::cfa); 0 if not known (this call's own is
// used).
int capture_addresses(void** frames, int max_frames, StackScope scope = StackScope::kWhole,
                      uintptr_t cfa = 0);
// The same where the caller has made capture_addresses's first tests (libunwind loaded, max_frames > 0):
// a guarded open's site (report.h capture_open_site) makes them once.
int capture_loaded_addresses(void** frames, int max_frames, StackScope scope, uintptr_t cfa);

// How many of `count` frames (innermost first) matter for a culprit (StackScope::kCulprit): with a
// Python stack shown, those above the first frame of the interpreter's evaluation loop (the Python
// stack tells the rest), less the interpreter's own frames just above it; at the bottom of a stack that
// `reached_bottom`, not the thread's start (libc's frames and the `_start` that calls them). At least
// one frame stays.
int frames_that_matter(void* const* frames, int count, bool python_shown, bool reached_bottom);

// "    #3 0x7f..: name+0x1a (libfoo.so+0x1234)" per frame.
void format_stack(TextBuffer& out, void* const* frames, int count, bool in_signal_handler);

}  // namespace appendguard
