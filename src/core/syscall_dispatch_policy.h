// The pure decisions of the raw-system-call layer (shim/syscall_dispatch.h): which trapped system calls
// go through a hook, how a raw clone is performed from a signal handler, and a trapped rt_sigprocmask
// applied to the mask the handler returns to. No system calls here: unit-tested directly.
#pragma once

#include <cstddef>
#include <cstdint>

namespace appendguard {

// What the handler does with a trapped system call (x86-64 numbers).
enum class RawCall : uint8_t {
  kPass,  // performed unchanged
  kOpen,
  kOpenat,
  kOpenat2,
  kCreat,
  kWrite,
  kPwrite64,
  kWritev,
  kPwritev,
  kPwritev2,
  kSendfile,
  kCopyFileRange,
  kSplice,
  kLseek,
  kFtruncate,
  kTruncate,
  kFallocate,
  kClose,
  kCloseRange,
  kDup,
  kDup2,
  kDup3,
  kFcntl,
  kRename,
  kRenameat,
  kRenameat2,
  kUnlink,
  kUnlinkat,
  kFork,   // fork, vfork
  kClone,  // clone
  kClone3,
  kExecve,
  kExecveat,
  kIoUringSetup,  // io_uring_setup, io_setup (libaio)
  kSigprocmask,   // rt_sigprocmask: applied to the mask the handler returns to
  kSigaction,     // rt_sigaction: SIGSYS is the layer's (the program's action is kept for chaining)
  kSigreturn,     // rt_sigreturn of the program's own restorer: the frame it returns from is restored
  kSigaltstack,   // sigaltstack: also written into the frame the handler returns to
};

// The table is indexed by system call number; numbers above it are passed.
RawCall classify_raw_call(long number);

// How a trapped clone/clone3 is performed from inside the SIGSYS handler, where the child returns into
// the handler's frame: only a child with its own copy of memory can do that.
enum class CloneWay : uint8_t {
  kAsFork,       // no CLONE_VM: performed with no stack (the child resumes on the stack it asked for)
  kVforkAsFork,  // CLONE_VM|CLONE_VFORK without a stack (a raw vfork): performed as a fork
  kRefused,      // CLONE_VM with a stack of its own (a raw thread): ENOSYS, one line
};
CloneWay clone_way(uint64_t flags, uint64_t stack);
// The flags a clone is performed with (CLONE_SETTLS is applied by the child itself, once off our TLS).
uint64_t clone_flags_performed(uint64_t flags, CloneWay way);

// rt_sigprocmask(how, set, old) applied to `mask` (the 64 signals of x86-64's kernel sigset): the new
// mask, SIGSYS never blocked (a blocked SIGSYS from dispatch kills the process). False for a bad `how`.
bool apply_sigprocmask(int how, const uint64_t* set, uint64_t& mask);
// A mask the program asks for, without SIGSYS.
uint64_t without_sigsys(uint64_t mask);
bool has_sigsys(uint64_t mask);
// Whether the program has SIGSYS blocked after its rt_sigprocmask(how, set) (the kernel never has it
// blocked where a trap can be raised): `before` without a set or with a bad `how`.
bool sigsys_blocked_after(int how, const uint64_t* set, bool before);
// A mask as the program reads it back (an old set, an old action's sa_mask): SIGSYS where it asked for it.
uint64_t as_program_set(uint64_t mask, bool sigsys_asked);

// Whether an ELF note segment's bytes hold Go's build ID note (owner "Go", type 4): the Go toolchain
// writes it in every Go executable, whose runtime makes its system calls itself.
bool notes_hold_go_build_id(const unsigned char* notes, size_t size);

// "MAJOR.MINOR..." as gnu_get_libc_version gives it (the layer needs glibc 2.34). Not sscanf: its first
// call in a process touches scanf's code and the locale tables, page faults of every start-up (issue 27).
bool parse_libc_version(const char* text, unsigned& major, unsigned& minor);
// Whether `text` (gnu_get_libc_version's) names glibc `major`.`minor` or later; false when unreadable.
bool libc_version_at_least(const char* text, unsigned major, unsigned minor);

}  // namespace appendguard
