// A preload library placed after libappendguard.so in LD_PRELOAD, so that appendguard's "real" write is
// this one: every FAULT_EVERY-th write to a descriptor above 2 fails with EINTR (FAULT_KIND=eintr) or
// writes only half of what was asked (FAULT_KIND=short). It shows that the position and end of file
// appendguard keeps follow exactly what the kernel did.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ssize_t (*g_next_write)(int, const void*, size_t);
static long g_calls;
static long g_injected;

// Says how many faults were injected, so that a test can tell they happened.
__attribute__((destructor)) static void report_injected(void) {
  if (!g_next_write) return;
  char line[64];
  int n = snprintf(line, sizeof line, "fault_libc: injected=%ld\n", g_injected);
  if (n > 0) (void)!g_next_write(2, line, (size_t)n);
}

ssize_t write(int fd, const void* buf, size_t count) {
  if (!g_next_write) g_next_write = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  const char* every_text = getenv("FAULT_EVERY");
  const char* kind = getenv("FAULT_KIND");
  long every = every_text ? atol(every_text) : 0;
  if (fd > 2 && every > 0 && kind && ++g_calls % every == 0) {
    if (strcmp(kind, "eintr") == 0) {
      ++g_injected;
      errno = EINTR;
      return -1;
    }
    if (strcmp(kind, "short") == 0 && count > 1) {
      ++g_injected;
      return g_next_write(fd, buf, count / 2);
    }
  }
  return g_next_write(fd, buf, count);
}
