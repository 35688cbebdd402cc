// A refused write inside a signal handler must be reported without allocating: the handler may have
// interrupted malloc, whose lock is not recursive. This program replaces malloc and friends (glibc
// supports that, and routes its own and every library's allocations through them) and counts the calls
// made while its handler runs.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void* __libc_malloc(size_t size);
extern void* __libc_calloc(size_t count, size_t size);
extern void* __libc_realloc(void* p, size_t size);
extern void* __libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void* p);

static volatile sig_atomic_t g_counting = 0;
static volatile int g_allocations = 0;

static void count(void) {
  if (g_counting) ++g_allocations;
}

void* malloc(size_t size) {
  count();
  return __libc_malloc(size);
}
void* calloc(size_t n, size_t size) {
  count();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) {
  count();
  return __libc_realloc(p, size);
}
void* memalign(size_t alignment, size_t size) {
  count();
  return __libc_memalign(alignment, size);
}
void* aligned_alloc(size_t alignment, size_t size) {
  count();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  count();
  *out = __libc_memalign(alignment, size);
  return *out ? 0 : ENOMEM;
}
void free(void* p) {
  count();
  __libc_free(p);
}

static int g_fd = -1;
static long g_handler_result = 0;
static int g_handler_errno = 0;

static void on_signal(int sig) {
  (void)sig;
  g_allocations = 0;
  g_counting = 1;
  lseek(g_fd, 0, SEEK_SET);
  g_handler_result = write(g_fd, "b", 1);
  g_handler_errno = errno;
  g_counting = 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  // The counter sees allocations made inside libc: strdup's.
  g_counting = 1;
  free(strdup(argv[1]));
  g_counting = 0;
  printf("control_allocations=%d\n", g_allocations);
  g_fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (write(g_fd, "0123456789", 10) != 10) return 3;
  signal(SIGUSR1, on_signal);
  raise(SIGUSR1);
  printf("handler_write=%ld errno=%d\nhandler_allocations=%d\n", g_handler_result,
         g_handler_result < 0 ? g_handler_errno : 0, g_allocations);
  close(g_fd);
  return 0;
}
