// Native backtraces through libunwind, which is dlopen'ed privately (RTLD_LOCAL) when the library is
// enabled: linked normally, libunwind.so.8 would put its own _Unwind_* exception ABI ahead of libgcc_s in
// the host's global symbol scope. Inert processes never load it.
#pragma once

#include "report/text_buffer.h"

namespace appendguard {

// Loads libunwind. Safe to call more than once; returns false if it is not installed.
bool load_unwinder();
// In the child of fork: if another thread of the parent was inside libunwind (and may have held its
// locks), this process never unwinds.
void unwinder_after_fork_child();

struct CapturedStack {
  static constexpr int kMaxFrames = 256;
  void* frames[kMaxFrames];
  int count = 0;
  bool in_signal_handler = false;  // a signal frame was seen: do not allocate (no demangling)
};

// Room for libunwind's context and cursor, kept off the stack (report/scratch.h).
constexpr size_t kUnwindSpace = 4096;

// Captures up to `max_frames` return addresses of the caller, skipping `skip` innermost frames and then
// every frame inside this library, so that the first frame shown is the program's call. `unwind_space`
// (kUnwindSpace bytes, 64-aligned) holds libunwind's state.
void capture_stack(CapturedStack& stack, int max_frames, int skip, unsigned char* unwind_space);

// Captures addresses only (for the site of an open, symbolized later if a report needs it).
int capture_addresses(void** frames, int max_frames, int skip);

// "    #3 0x7f..: name+0x1a (libfoo.so+0x1234)" per frame.
void format_stack(TextBuffer& out, void* const* frames, int count, bool in_signal_handler);

}  // namespace appendguard
