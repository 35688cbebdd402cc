// The cost of arming Syscall User Dispatch as the library does, and of a libc call in an armed thread
// (docs/benchmarks.md, "Raw system calls"). Build: gcc -O2 dispatch_arm_cost.c -o arm; ./arm [block]
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
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
int main(int argc, char** argv) {
  Dl_info info;
  dladdr((void*)&syscall, &info);
  base = (unsigned long)info.dli_fbase;
  dl_iterate_phdr(cb, 0);
  sel = argc > 1 ? 1 : 0;  // BLOCK: libc calls are still in range
  double r[41];
  int n = 20000;
  for (int k = 0; k < 41; k++) {
    double a0 = now();
    for (int i = 0; i < n; i++) getppid();
    double a1 = now();
    prctl(59, 1, lo, len, &sel);
    double b0 = now();
    for (int i = 0; i < n; i++) getppid();
    double b1 = now();
    prctl(59, 0, 0, 0, 0);
    r[k] = (b1 - b0) / (a1 - a0);
  }
  qsort(r, 41, sizeof r[0], cmp);
  printf("selector %s: libc getppid armed/unarmed median ratio %.3f (quartiles %.3f-%.3f)\n",
         sel ? "BLOCK" : "ALLOW", r[20], r[10], r[30]);
}
