// A refused write, and its report, from a thread with a small stack and from a signal handler on a small
// sigaltstack. Both stacks are mmap'ed with a guard page below, so an overflow is a SIGSEGV (not a silent
// heap corruption), and painted, so that the deepest byte the report touched can be measured.
// Usage: small_stack_report PATH STACK_BYTES (thread|handler) [measure]
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int g_fd = -1;
static long g_result = 0;
static int g_errno = 0;

// The file is opened by main: what is measured is the refused write and its report.
static void write_backwards(void) {
  g_result = pwrite(g_fd, "x", 1, 0);
  g_errno = g_result < 0 ? errno : 0;
}

static void* thread_main(void* arg) {
  (void)arg;
  write_backwards();
  return NULL;
}

static void handler(int sig) {
  (void)sig;
  write_backwards();
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  g_fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (g_fd < 0 || write(g_fd, "0123456789", 10) != 10) return 7;
  size_t size = strtoul(argv[2], NULL, 0);
  long page = sysconf(_SC_PAGESIZE);
  char* region = mmap(NULL, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED || mprotect(region, page, PROT_NONE) != 0) return 3;
  char* stack = region + page;
  memset(stack, 0xA5, size);
  if (!strcmp(argv[3], "thread")) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (pthread_attr_setstack(&attr, stack, size) != 0) return 4;
    pthread_t thread;
    if (pthread_create(&thread, &attr, thread_main, NULL) != 0) return 5;
    pthread_join(thread, NULL);
  } else {
    stack_t ss = {.ss_sp = stack, .ss_size = size, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) return 6;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, NULL);
    raise(SIGUSR1);
  }
  size_t untouched = 0;
  while (untouched < size && (unsigned char)stack[untouched] == 0xA5) ++untouched;
  printf("result=%ld errno=%d\n", g_result, g_errno);
  printf("stack_used=%zu\n", size - untouched);
  return 0;
}
