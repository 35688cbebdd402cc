// The Python stack of the calling thread, when the host process is a CPython interpreter (3.9 or later).
// Found at run time with dlsym, so the library does not depend on libpython. CPython releases the GIL
// around file writes; the stack is read after taking it back with PyGILState_Ensure, the same way a C
// callback from a GIL-free region does.
#pragma once

#include "report/text_buffer.h"

namespace appendguard {

// Appends "    File "x.py", line 12, in save\n" lines, most recent call first. Call it without holding any
// lock that a thread holding the GIL could wait for. Returns false (and appends nothing)
// when the process has no running Python interpreter.
bool format_python_stack(TextBuffer& out, int max_frames);
// In the child of fork: a loading of the Python API cut short by the fork is started again.
void python_stack_after_fork_child();

}  // namespace appendguard
