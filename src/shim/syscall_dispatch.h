// The raw-system-call layer: Syscall User Dispatch (Linux 5.11+) sends SIGSYS for every system call
// made outside libc's text by a thread whose own selector byte says BLOCK; the handler sends each trapped
// call through the hook of its libc twin (the same decisions), and performs every other one unchanged.
// docs/design.md, "System calls made outside libc".
#pragma once

#include <linux/openat2.h>
#include <signal.h>
#include <stddef.h>

#include "core/config.h"

namespace appendguard {

// At load, once the configuration is read (runtime.cpp): installs the SIGSYS handler after a probe that
// arms the calling thread, unless APPENDGUARD_SYSCALLS=off or the kernel refuses; with auto the thread is
// disarmed again unless it already holds guarded descriptors (a thread is armed only while it traps).
void start_syscall_dispatch(const Config& config);
// A thread we saw created (pthread_create, with always) and a fork child's thread: armed if its selector
// is BLOCK (always: every thread's; auto: a fork child of a trapping thread).
void arm_syscall_dispatch_in_this_thread();
// In a fork child (its handler): the lock of the exclusive-created descriptors, which another thread of the
// parent may have held at the fork (third adversarial round: the child's O_CREAT|O_EXCL open waited forever
// with every signal blocked).
void reset_exclusive_after_fork_child();
// Whether the layer is available in this process (threads arm as they need), for notices and the doctor.
bool syscall_dispatch_armed();
// True on this thread while the handler performs a trapped call (trace lines say "raw system call").
bool raw_system_call_in_progress();

// The SIGSYS action the program set while the layer holds SIGSYS: kept, and chained to for every SIGSYS
// that dispatch did not send. False when the layer does not hold SIGSYS (the caller does the real call).
bool program_sigsys_action(const struct sigaction* action, struct sigaction* old);

// An open with O_CREAT|O_EXCL of a file the library does not guard succeeded (hooks_open.cpp): with
// APPENDGUARD_SYSCALLS=auto the layer traps the calling thread's raw calls while that descriptor stays
// open, so that the raw rename that publishes a temporary file (safetensors 0.8's, onto a chattr +a
// target) is seen and a refusal said. Its closing is seen lazily: each trapped call checks that the
// descriptors recorded still refer to their files (at most 16 are recorded).
void note_exclusive_create(int fd);

// A raw openat2 (hooks_open.cpp): openat's decision, performed with the program's open_how.
int openat2_through_hook(int dirfd, const char* path, const open_how* how, size_t size);

}  // namespace appendguard
