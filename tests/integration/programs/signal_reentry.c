// A signal handler that writes to the guarded file whose large write its thread is in the middle of:
// the handler's write must be refused, not wait forever for a lock its own thread holds.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_fd = -1;
static volatile long g_handler_result = -2;
static volatile int g_handler_errno = 0;
static atomic_int g_writing = 0;

static void on_signal(int sig) {
  (void)sig;
  int saved = errno;
  g_handler_result = write(g_fd, "s", 1);
  g_handler_errno = g_handler_result < 0 ? errno : 0;
  errno = saved;
}

static void* interrupter(void* main_thread) {
  while (!g_writing) usleep(100);
  usleep(1000);  // well inside the write of 64 MiB
  pthread_kill(*(pthread_t*)main_thread, SIGUSR1);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const size_t size = (size_t)64 << 20;
  char* data = malloc(size);
  if (!data) return 3;
  memset(data, 'd', size);
  g_fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_signal;
  sigaction(SIGUSR1, &action, NULL);
  pthread_t self = pthread_self();
  pthread_t thread;
  pthread_create(&thread, NULL, interrupter, &self);
  g_writing = 1;
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(g_fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += (size_t)n;
  }
  pthread_join(thread, NULL);
  printf("main_written=%zu\nhandler_result=%ld\nhandler_errno=%d\n", done, g_handler_result, g_handler_errno);
  close(g_fd);
  free(data);
  return 0;
}
