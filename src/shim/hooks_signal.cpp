// Signal masks and actions while the raw-system-call layer is available (signal_masks.h): libc's
// sigaction, signal, sigprocmask and pthread_sigmask, and the raw rt_sigprocmask, rt_sigaction and
// rt_sigreturn the SIGSYS handler performs.
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>

#include <atomic>
#include <type_traits>

#include "core/syscall_dispatch_policy.h"
#include "shim/hook.h"
#include "shim/signal_masks.h"
#include "shim/syscall_dispatch.h"
#include "shim/user_memory.h"

namespace appendguard {
namespace {

// Whether the program asked this thread's SIGSYS blocked (the kernel's mask never has it).
__attribute__((tls_model("initial-exec"))) constinit thread_local bool t_program_blocks_sigsys = false;
// Bit sig - 1: the program's handler of `sig` asked SIGSYS in its sa_mask.
constinit std::atomic<uint64_t> g_handler_masks_with_sigsys{0};

constexpr uint64_t signal_bit(long sig) {
  return uint64_t{1} << (sig - 1);
}

bool handler_mask_had_sigsys(long sig) {
  return (g_handler_masks_with_sigsys.load(std::memory_order_relaxed) & signal_bit(sig)) != 0;
}

void note_handler_mask(long sig, bool with_sigsys) {
  if (with_sigsys)
    g_handler_masks_with_sigsys.fetch_or(signal_bit(sig), std::memory_order_relaxed);
  else
    g_handler_masks_with_sigsys.fetch_and(~signal_bit(sig), std::memory_order_relaxed);
}

uint64_t first_word(const sigset_t& set) {
  uint64_t word;
  memcpy(&word, &set, sizeof word);
  return word;
}

// The kernel's struct sigaction on x86-64.
struct KernelSigaction {
  void* handler;
  unsigned long flags;
  void* restorer;
  uint64_t mask;
};

// What the kernel's rt_sigreturn reads of the frame (the kernel's struct ucontext: glibc's ucontext_t up
// to its first sigset word).
constexpr size_t kKernelUcontextBytes = offsetof(ucontext_t, uc_sigmask) + sizeof(uint64_t);

}  // namespace

long program_rt_sigprocmask(long how, const void* set, void* old, long size, uint64_t* frame_mask) {
  if (size != sizeof(uint64_t)) return -EINVAL;
  uint64_t asked = 0;
  if (set && !copy_from_program(&asked, set, sizeof asked)) return -EFAULT;
  const uint64_t* asked_set = set ? &asked : nullptr;
  const bool blocked_before = t_program_blocks_sigsys;
  uint64_t before = 0;
  if (frame_mask) {
    before = *frame_mask;
    uint64_t mask = before;
    if (!apply_sigprocmask(static_cast<int>(how), asked_set, mask)) return -EINVAL;
    *frame_mask = mask;
  } else {
    const uint64_t kept = without_sigsys(asked);
    if (real_syscall(SYS_rt_sigprocmask, how, set ? &kept : nullptr, &before, sizeof before) != 0)
      return -errno;
  }
  t_program_blocks_sigsys = sigsys_blocked_after(static_cast<int>(how), asked_set, blocked_before);
  const uint64_t seen = as_program_set(before, blocked_before);
  if (old && !copy_to_program(old, &seen, sizeof seen)) return -EFAULT;
  return 0;
}

long program_rt_sigaction(long sig, const void* action, void* old, long size) {
  if (size != sizeof(uint64_t) || sig < 1 || sig > 64)
    return real_syscall(SYS_rt_sigaction, sig, action, old, size) == 0 ? 0 : -errno;
  KernelSigaction asked{};
  if (action && !copy_from_program(&asked, action, sizeof asked)) return -EFAULT;
  const bool asked_sigsys = has_sigsys(asked.mask);
  asked.mask = without_sigsys(asked.mask);
  const bool had_sigsys = handler_mask_had_sigsys(sig);
  KernelSigaction before{};
  if (real_syscall(SYS_rt_sigaction, sig, action ? &asked : nullptr, old ? &before : nullptr, size) != 0)
    return -errno;
  if (action) note_handler_mask(sig, asked_sigsys);
  before.mask = as_program_set(before.mask, had_sigsys);
  if (old && !copy_to_program(old, &before, sizeof before)) return -EFAULT;
  return 0;
}

bool take_program_signal_frame(ucontext_t* uc) {
  // The restorer's `syscall` runs where the handler's `ret` left %rsp: just above the frame's return
  // address, at its ucontext (the kernel's rt_sigreturn reads it there).
  const auto* frame = reinterpret_cast<const void*>(uc->uc_mcontext.gregs[REG_RSP]);
  alignas(ucontext_t) unsigned char taken[kKernelUcontextBytes];
  if (!copy_from_program(taken, frame, sizeof taken)) return false;
  memcpy(static_cast<void*>(uc), taken, sizeof taken);  // its fpregs pointer stays the program frame's
  uint64_t mask;
  memcpy(&mask, &uc->uc_sigmask, sizeof mask);
  mask = without_sigsys(mask);
  memcpy(&uc->uc_sigmask, &mask, sizeof mask);
  return true;
}

void unblock_sigsys_in_this_thread() {
  const uint64_t sigsys = signal_bit(SIGSYS);
  uint64_t old = 0;
  if (real_syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &sigsys, &old, sizeof old) == 0 && has_sigsys(old))
    t_program_blocks_sigsys = true;
}

}  // namespace appendguard

using namespace appendguard;

namespace {

// TSan's runtime calls the next sigaction (ours, found by its dlsym) while it initializes, before it can
// take the function-entry events its instrumentation emits (a TSan build of the library segfaulted in
// every program). Under TSan these hooks are uninstrumented pass-throughs: the layer is off under
// sanitizer runtimes anyway (start_syscall_dispatch), so the program's masks need no bookkeeping there.
#if defined(__SANITIZE_THREAD__)
#define APPENDGUARD_NOT_UNDER_TSAN __attribute__((no_sanitize_thread))
#define APPENDGUARD_PASS_THROUGH_UNDER_TSAN(Type, name, ...)                       \
  static std::type_identity_t<Type> next_##name = nullptr;                         \
  if (!next_##name) next_##name = reinterpret_cast<Type>(dlsym(RTLD_NEXT, #name)); \
  return next_##name(__VA_ARGS__)
#else
#define APPENDGUARD_NOT_UNDER_TSAN
#define APPENDGUARD_PASS_THROUGH_UNDER_TSAN(Type, name, ...)
#endif

// sigprocmask and pthread_sigmask: the program's set without SIGSYS; the old set with the SIGSYS it asked.
template <typename Real>
int program_mask(Real real, int how, const sigset_t* set, sigset_t* old) {
  if (__builtin_expect(!syscall_dispatch_armed(), 1)) return real(how, set, old);
  sigset_t kept;
  const sigset_t* given = set;
  if (set && how != SIG_UNBLOCK && sigismember(set, SIGSYS)) {
    kept = *set;
    sigdelset(&kept, SIGSYS);
    given = &kept;
  }
  const uint64_t asked = set ? first_word(*set) : 0;
  const bool blocked_before = t_program_blocks_sigsys;
  const int result = real(how, given, old);
  if (result != 0) return result;
  t_program_blocks_sigsys = sigsys_blocked_after(how, set ? &asked : nullptr, blocked_before);
  if (old && blocked_before) sigaddset(old, SIGSYS);
  return 0;
}

}  // namespace

#if defined(__SANITIZE_THREAD__)
#include <dlfcn.h>
#endif

APPENDGUARD_HOOK APPENDGUARD_NOT_UNDER_TSAN int sigaction(int sig, const struct sigaction* action,
                                                          struct sigaction* old) {
  APPENDGUARD_PASS_THROUGH_UNDER_TSAN(int (*)(int, const struct sigaction*, struct sigaction*), sigaction,
                                      sig, action, old);
  if (sig == SIGSYS && program_sigsys_action(action, old)) return 0;
  if (__builtin_expect(!syscall_dispatch_armed(), 1) || sig < 1 || sig > 64)
    return real_sigaction(sig, action, old);
  // A handler's sa_mask is the mask its signal's frame runs with: a raw call made there is trapped.
  struct sigaction kept;
  const struct sigaction* given = action;
  const bool asked_sigsys = action && sigismember(&action->sa_mask, SIGSYS);
  if (asked_sigsys) {
    kept = *action;
    sigdelset(&kept.sa_mask, SIGSYS);
    given = &kept;
  }
  const bool had_sigsys = handler_mask_had_sigsys(sig);
  const int result = real_sigaction(sig, given, old);
  if (result != 0) return result;
  if (action) note_handler_mask(sig, asked_sigsys);
  if (old && had_sigsys) sigaddset(&old->sa_mask, SIGSYS);
  return 0;
}

APPENDGUARD_HOOK APPENDGUARD_NOT_UNDER_TSAN __sighandler_t signal(int sig, __sighandler_t handler) {
  APPENDGUARD_PASS_THROUGH_UNDER_TSAN(__sighandler_t(*)(int, __sighandler_t), signal, sig, handler);
  if (sig == SIGSYS) {
    struct sigaction action = {};
    action.sa_handler = handler;
    action.sa_flags = SA_RESTART;  // glibc's signal(): BSD semantics
    struct sigaction old = {};
    if (program_sigsys_action(&action, &old)) return old.sa_handler;
  }
  return real_signal(sig, handler);
}

// A thread that blocks every signal (sigfillset, common in worker threads) keeps SIGSYS: dispatch's SIGSYS
// cannot wait, and the kernel would end the process.
APPENDGUARD_HOOK APPENDGUARD_NOT_UNDER_TSAN int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) {
  APPENDGUARD_PASS_THROUGH_UNDER_TSAN(int (*)(int, const sigset_t*, sigset_t*), pthread_sigmask, how, set,
                                      old);
  return program_mask(real_pthread_sigmask.get(), how, set, old);
}

APPENDGUARD_HOOK APPENDGUARD_NOT_UNDER_TSAN int sigprocmask(int how, const sigset_t* set, sigset_t* old) {
  APPENDGUARD_PASS_THROUGH_UNDER_TSAN(int (*)(int, const sigset_t*, sigset_t*), sigprocmask, how, set, old);
  return program_mask(real_sigprocmask.get(), how, set, old);
}
