// The kernel's own price of Syscall User Dispatch, without the library: the same libc call in a thread
// armed as the library arms it (libc's text allowed, so the call is never trapped) and unarmed, in
// interleaved pairs (docs/benchmarks.md, "Raw system calls").
// Build: gcc -O2 dispatch_arm_cost.c -o arm
// Run:   ./arm [block]                 libc getppid(), 20,000 per side of a pair
//        ./arm [block] write64 DIR     a 64 B write to DIR/dispatch-probe.bin opened O_WRONLY|O_APPEND,
//                                      as bench_hooks tracked_write_64 writes (the file is removed after)
// `block` sets the selector to BLOCK (what the library's auto mode sets while a thread holds a guarded
// file); libc's calls are inside the allowed range either way.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
static char sel;
static unsigned long lo, len, base;
static int cb(struct dl_phdr_info* i, size_t s, void* d) {
  (void)s;
  (void)d;
  if (i->dlpi_addr != base) return 0;
  for (int k = 0; k < i->dlpi_phnum; k++)
    if (i->dlpi_phdr[k].p_type == PT_LOAD && (i->dlpi_phdr[k].p_flags & PF_X)) {
      lo = i->dlpi_addr + i->dlpi_phdr[k].p_vaddr;
      len = i->dlpi_phdr[k].p_memsz;
      return 1;
    }
  return 0;
}
static double now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}
static int cmp(const void* a, const void* b) {
  double x = *(double*)a, y = *(double*)b;
  return x < y ? -1 : x > y;
}
static int fd = -1;
static char buf[64];
static void one_call(void) {
  if (fd < 0)
    getppid();
  else if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
    abort();
}
// ns per call of `n` calls, armed or not.
static double side(int n, int armed) {
  if (armed && prctl(59, 1, lo, len, &sel) != 0) {
    perror("prctl(PR_SET_SYSCALL_USER_DISPATCH)");
    exit(1);
  }
  double t0 = now();
  for (int i = 0; i < n; i++) one_call();
  double t1 = now();
  if (armed) prctl(59, 0, 0, 0, 0);
  return (t1 - t0) / n;
}
int main(int argc, char** argv) {
  int arg = 1;
  if (arg < argc && strcmp(argv[arg], "block") == 0) {
    sel = 1;  // BLOCK: libc calls are still in range
    ++arg;
  }
  char path[4096] = "";
  if (arg + 1 < argc && strcmp(argv[arg], "write64") == 0) {
    snprintf(path, sizeof path, "%s/dispatch-probe.bin", argv[arg + 1]);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    if (fd < 0) {
      perror(path);
      return 1;
    }
  } else if (arg < argc) {
    fprintf(stderr, "usage: %s [block] [write64 DIR]\n", argv[0]);
    return 2;
  }
  Dl_info info;
  dladdr((void*)&syscall, &info);
  base = (unsigned long)info.dli_fbase;
  dl_iterate_phdr(cb, 0);
  enum { kPairs = 41 };
  double ratio[kPairs], plain[kPairs], armed[kPairs];
  int n = 20000;
  for (int k = 0; k < kPairs; k++) {
    if (fd >= 0 && ftruncate(fd, 0) != 0) abort();  // a file of the same size for both sides
    plain[k] = side(n, 0);
    armed[k] = side(n, 1);
    ratio[k] = armed[k] / plain[k];
  }
  qsort(ratio, kPairs, sizeof ratio[0], cmp);
  qsort(plain, kPairs, sizeof plain[0], cmp);
  qsort(armed, kPairs, sizeof armed[0], cmp);
  printf(
      "selector %s, %s: unarmed %.1f ns, armed %.1f ns (medians); armed/unarmed median ratio %.3f "
      "(quartiles %.3f-%.3f, %d pairs)\n",
      sel ? "BLOCK" : "ALLOW", fd >= 0 ? "64 B write (O_APPEND)" : "libc getppid", plain[kPairs / 2],
      armed[kPairs / 2], ratio[kPairs / 2], ratio[kPairs / 4], ratio[3 * kPairs / 4], kPairs);
  if (fd >= 0) unlink(path);
}
