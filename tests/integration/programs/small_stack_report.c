// A refused write, and its report, from a thread with a small stack and from a signal handler on a small
// sigaltstack. Both stacks are mmap'ed with a guard page below, so an overflow is a SIGSEGV (not a silent
// heap corruption), and painted, so that the deepest byte the report touched can be measured.
// Usage: small_stack_report PATH STACK_BYTES (thread|handler) [measure]
// For a handler, STACK_BYTES are what the handler is left once the kernel has pushed its signal frame: that
// frame holds the CPU's register state, whose size depends on the processor (about 1 KiB with AVX2,
// about 3.5 KiB with AVX-512), so the sigaltstack is STACK_BYTES plus the frame measured on this machine.
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

// How far below the top of the sigaltstack a handler starts: the kernel's signal frame.
static char* g_calibration_top = NULL;
static size_t g_signal_frame = 0;
static void calibration_handler(int sig) {
  (void)sig;
  char here = 0;
  g_signal_frame = (size_t)(g_calibration_top - &here);
}

static size_t measure_signal_frame(void) {
  static char calibration_stack[1 << 16];
  g_calibration_top = calibration_stack + sizeof calibration_stack;
  stack_t ss = {.ss_sp = calibration_stack, .ss_size = sizeof calibration_stack, .ss_flags = 0};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = calibration_handler;
  sa.sa_flags = SA_ONSTACK;
  if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR2, &sa, NULL) != 0) return 0;
  raise(SIGUSR2);
  return g_signal_frame;
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  g_fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (g_fd < 0 || write(g_fd, "0123456789", 10) != 10) return 7;
  size_t size = strtoul(argv[2], NULL, 0);
  size_t signal_frame = 0;
  if (!strcmp(argv[3], "handler")) {
    signal_frame = measure_signal_frame();
    if (signal_frame == 0) return 8;
    size += signal_frame;
  }
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
  printf("stack_used=%zu\n", size - untouched - signal_frame);
  printf("signal_frame=%zu\n", signal_frame);
  return 0;
}
