// The signal masks a program sets, as the raw-system-call layer gives them to the kernel while it is
// available: never with SIGSYS, where a trap could be raised (a SIGSYS from dispatch that finds SIGSYS
// blocked ends the process), and read back by the program as it set them. libc's sigprocmask,
// pthread_sigmask and sigaction (hooks_signal.cpp) and their raw twins (trapped, or through libc's
// syscall()) take the same way: this thread remembers whether the program asked SIGSYS blocked, and each
// signal whether its handler's sa_mask had SIGSYS.
#pragma once

#include <signal.h>
#include <stdint.h>
#include <sys/ucontext.h>

namespace appendguard {

// rt_sigprocmask(how, set, old, size) for the program, with the kernel's results (-errno), its pointers
// read as the kernel reads them. `frame_mask`: the mask of the signal frame the SIGSYS handler returns to
// (a trapped call is applied there), or null for this thread's mask (libc's syscall()).
long program_rt_sigprocmask(long how, const void* set, void* old, long size, uint64_t* frame_mask);
// rt_sigaction(sig, action, old, size) for the program, any signal but SIGSYS while the layer holds it.
long program_rt_sigaction(long sig, const void* action, void* old, long size);
// A trapped rt_sigreturn made by the program's own restorer (a raw rt_sigaction's SA_RESTORER): the
// SIGSYS handler's frame `uc` takes the registers and mask of the frame the program returns from, so
// that the handler's own return resumes the program where its signal interrupted it. False when that
// frame cannot be read.
bool take_program_signal_frame(ucontext_t* uc);
// As this thread starts trapping: SIGSYS unblocked (a raw rt_sigprocmask before the layer trapped it may
// have blocked it), remembered as the program's if it was.
void unblock_sigsys_in_this_thread();

}  // namespace appendguard
