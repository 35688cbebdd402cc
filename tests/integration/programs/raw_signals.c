// Signal masks, handlers and bad pointers under the raw-system-call layer, for test_raw_signals.py.
// Usage: raw_signals CASE DIR. Each case prints key=value lines; a raw call's result is the kernel's
// (a negative errno for a failure). DIR/witness.safetensors is the guarded file the cases write.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static long raw6(long n, long a, long b, long c, long d, long e, long f) {
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}
#define RAW(n, ...) raw_args(n, __VA_ARGS__, 0, 0, 0, 0, 0, 0)
#define raw_args(n, a, b, c, d, e, f, ...) \
  raw6(n, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif
#define BIT(sig) (1ULL << ((sig)-1))

// The kernel's struct sigaction on x86-64.
struct kernel_sigaction {
  void* handler;
  unsigned long flags;
  void* restorer;
  uint64_t mask;
};

// A restorer of the program's own, outside libc (as Go's runtime has without cgo): a raw rt_sigreturn.
void own_restorer(void);
__asm__(
    ".text\n.globl own_restorer\n.type own_restorer,@function\nown_restorer:\n"
    "  movq $15, %rax\n  syscall\n  hlt\n.size own_restorer,.-own_restorer\n");

static char path[4096];
static int guarded_fd = -1;
static volatile long handler_result = 1;

static int witness(void) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "abcd", 4) != 4) {
    perror("witness");
    exit(3);
  }
  return fd;
}

// A raw write at 0 of the guarded file: refused (-EOPNOTSUPP) when the trap is served.
static void raw_write_at_zero(int sig) {
  (void)sig;
  handler_result = RAW(SYS_pwrite64, guarded_fd, "0000", 4, 0);
}

static int sigsys_in_mask_now(void) {
  uint64_t now = 0;
  RAW(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &now, 8);
  return (now & BIT(SIGSYS)) != 0;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* which = argv[1];
  snprintf(path, sizeof path, "%s/witness.safetensors", argv[2]);
  if (!strcmp(which, "full_mask_handler")) {  // libc's sigaction, every signal in sa_mask
    guarded_fd = witness();
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = raw_write_at_zero;
    sigfillset(&action.sa_mask);
    sigaction(SIGUSR1, &action, NULL);
    raise(SIGUSR1);
    printf("handler_pwrite64_at_0=%ld\n", handler_result);
    struct sigaction seen;
    sigaction(SIGUSR1, NULL, &seen);
    printf("old_mask_has_sigsys=%d\n", sigismember(&seen.sa_mask, SIGSYS));
    return 0;
  }
  if (!strcmp(which, "raw_full_mask_handler")) {  // a raw rt_sigaction with its own restorer
    guarded_fd = witness();
    struct kernel_sigaction action = {(void*)raw_write_at_zero, SA_RESTORER, (void*)own_restorer, ~0ULL};
    printf("rt_sigaction=%ld\n", RAW(SYS_rt_sigaction, SIGUSR1, &action, NULL, 8));
    volatile int kept = 42;
    RAW(SYS_kill, getpid(), SIGUSR1);
    printf("handler_pwrite64_at_0=%ld\n", handler_result);
    printf("after_own_restorer=%d\n", kept);
    uint64_t now = 0;
    RAW(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &now, 8);
    printf("mask_after_has_sigusr1=%d\n", (now & BIT(SIGUSR1)) != 0);
    struct kernel_sigaction seen;
    memset(&seen, 0, sizeof seen);
    RAW(SYS_rt_sigaction, SIGUSR1, NULL, &seen, 8);
    printf("old_mask_has_sigsys=%d\n", (seen.mask & BIT(SIGSYS)) != 0);
    return 0;
  }
  if (!strcmp(which, "blocked_before_trapping")) {  // auto: SIGSYS blocked before the thread traps
    uint64_t every = ~0ULL;
    RAW(SYS_rt_sigprocmask, SIG_BLOCK, &every, NULL, 8);
    guarded_fd = witness();  // the thread starts trapping
    printf("pwrite64_at_0=%ld\n", RAW(SYS_pwrite64, guarded_fd, "0000", 4, 0));
    printf("raw_mask_has_sigsys=%d\n", sigsys_in_mask_now());
    sigset_t old;
    sigprocmask(SIG_BLOCK, NULL, &old);
    printf("libc_mask_has_sigsys=%d\n", sigismember(&old, SIGSYS));
    return 0;
  }
  if (!strcmp(which, "mask_readback")) {  // the masks the program reads back are the ones it set
    guarded_fd = witness();
    sigset_t sigsys, old;
    sigemptyset(&sigsys);
    sigaddset(&sigsys, SIGSYS);
    pthread_sigmask(SIG_BLOCK, &sigsys, NULL);
    pthread_sigmask(SIG_BLOCK, NULL, &old);
    printf("libc_blocked=%d\n", sigismember(&old, SIGSYS));
    printf("raw_blocked=%d\n", sigsys_in_mask_now());
    printf("pwrite64_at_0=%ld\n", RAW(SYS_pwrite64, guarded_fd, "0000", 4, 0));
    pthread_sigmask(SIG_UNBLOCK, &sigsys, NULL);
    pthread_sigmask(SIG_BLOCK, NULL, &old);
    printf("libc_unblocked=%d\n", sigismember(&old, SIGSYS));
    uint64_t set = BIT(SIGSYS);
    RAW(SYS_rt_sigprocmask, SIG_BLOCK, &set, NULL, 8);
    printf("raw_set_blocked=%d\n", sigsys_in_mask_now());
    RAW(SYS_rt_sigprocmask, SIG_UNBLOCK, &set, NULL, 8);
    printf("raw_set_unblocked=%d\n", sigsys_in_mask_now());
    return 0;
  }
  if (!strcmp(which, "bad_pointers")) {  // every one the kernel answers with -EFAULT (-14)
    guarded_fd = witness();
    void* bad = (void*)8;
    printf("rt_sigprocmask_set=%ld\n", RAW(SYS_rt_sigprocmask, SIG_BLOCK, bad, NULL, 8));
    printf("rt_sigprocmask_old=%ld\n", RAW(SYS_rt_sigprocmask, SIG_BLOCK, NULL, bad, 8));
    printf("rt_sigaction_act=%ld\n", RAW(SYS_rt_sigaction, SIGUSR1, bad, NULL, 8));
    printf("rt_sigaction_old=%ld\n", RAW(SYS_rt_sigaction, SIGUSR1, NULL, bad, 8));
    printf("clone3=%ld\n", RAW(SYS_clone3, bad, sizeof(struct clone_args)));
    printf("rename=%ld\n", RAW(SYS_rename, bad, path));
    printf("rename_to=%ld\n", RAW(SYS_rename, path, bad));
    printf("open=%ld\n", RAW(SYS_open, bad, O_RDONLY));
    printf("openat=%ld\n", RAW(SYS_openat, AT_FDCWD, bad, O_WRONLY));
    printf("pwritev2=%ld\n", RAW(SYS_pwritev2, guarded_fd, bad, 1, -1, 0, 0));
    printf("writev=%ld\n", RAW(SYS_writev, guarded_fd, bad, 2));
    printf("unlink=%ld\n", RAW(SYS_unlink, bad));
    return 0;
  }
  return 2;
}
