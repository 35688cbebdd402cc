// Adversarial scenarios for test_safety.py: races, signal handlers, fork, vfork, descriptor passing.
// Each subcommand prints key=value lines (see harness.results).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd_passing.h"

static void show(const char* key, long result) {
  if (result < 0) {
    printf("%s=%ld errno=%d\n", key, result, errno);
  } else {
    printf("%s=%ld\n", key, result);
  }
  fflush(stdout);
}

static long file_size(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

// ---------------------------------------------------------------- close racing an in-flight write

struct race {
  int fd;
  atomic_int started;
  size_t size;
  char* buf;
};

static void* write_once(void* arg) {
  struct race* r = arg;
  atomic_store(&r->started, 1);
  (void)!write(r->fd, r->buf, r->size);  // may fail with EBADF when the close wins
  return NULL;
}

// A writer thread's write is in flight when the main thread closes its descriptor and opens another
// file, which gets the same number. The other file's state must not take the write's result: an append
// at its real end is allowed, a write at the end the stale write would have left is refused. A second
// descriptor keeps A open, so that B's open cannot wait for A's file lock by recycling A's record.
// A writer preempted between `started` and its call writes to B, as it would without the library (the
// number is B's by then): A is then empty and B holds its 10 bytes and the write's, and the round is not
// judged (`landed_in_b`).
static int case_close_race(const char* path_a, const char* path_b, int rounds) {
  struct race r = {.size = 4 << 20};
  r.buf = malloc(r.size);
  memset(r.buf, 'w', r.size);
  int wrong = 0;
  int landed_in_b = 0;
  for (int i = 0; i < rounds; ++i) {
    r.fd = open(path_a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int keeper = open(path_a, O_WRONLY | O_APPEND);
    atomic_store(&r.started, 0);
    pthread_t writer;
    pthread_create(&writer, NULL, write_once, &r);
    while (!atomic_load(&r.started)) {
    }
    for (volatile int spin = 0; spin < (i % 50) * 100; ++spin) {
    }
    close(r.fd);
    int b = open(path_b, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    (void)!write(b, "0123456789", 10);
    pthread_join(writer, NULL);
    if (file_size(path_a) == 0 && file_size(path_b) == 10 + (long)r.size) {
      ++landed_in_b;
      close(b);
      close(keeper);
      continue;
    }
    // B holds 10 bytes: an append there must pass, and nothing may have been written past it.
    if (pwrite(b, "x", 1, 10) != 1) ++wrong;
    if (pwrite(b, "y", 1, (off_t)r.size) != -1) ++wrong;
    close(b);
    close(keeper);
    if (file_size(path_b) != 11) ++wrong;
  }
  show("wrong", wrong);
  show("landed_in_b", landed_in_b);
  free(r.buf);
  return 0;
}

// ---------------------------------------------------------------- signal handlers

static int g_handler_fd = -1;
static atomic_long g_handler_passed;
static atomic_long g_handler_refused;
static atomic_long g_handler_calls;
static const char* g_handler_path;

static void handler_pwrite(int sig) {
  (void)sig;
  int saved = errno;
  atomic_fetch_add(&g_handler_calls, 1);
  if (pwrite(g_handler_fd, "h", 1, 0) == 1) {
    atomic_fetch_add(&g_handler_passed, 1);
  } else {
    atomic_fetch_add(&g_handler_refused, 1);
  }
  errno = saved;
}

static void handler_open_close(int sig) {
  (void)sig;
  int saved = errno;
  atomic_fetch_add(&g_handler_calls, 1);
  int fd = open(g_handler_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    (void)!write(fd, "h", 1);
    close(fd);
  }
  errno = saved;
}

static void start_timer(void (*handler)(int), long microseconds) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval t = {{0, microseconds}, {0, microseconds}};
  setitimer(ITIMER_REAL, &t, NULL);
}

static void stop_timer(void) {
  struct itimerval t = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &t, NULL);
  signal(SIGALRM, SIG_IGN);
}

// The main thread loops guarded open/append/close on A while a handler writes at offset 0 of B every
// 200 us: every handler write must be refused, wherever in our code the signal lands.
static int case_handler_pwrite(const char* path_a, const char* path_b, int rounds) {
  g_handler_fd = open(path_b, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  (void)!write(g_handler_fd, "0123456789", 10);
  start_timer(handler_pwrite, 200);
  for (int i = 0; i < rounds; ++i) {
    int fd = open(path_a, O_WRONLY | O_CREAT | O_APPEND, 0644);
    (void)!write(fd, "a", 1);
    close(fd);
  }
  stop_timer();
  show("handler_calls", atomic_load(&g_handler_calls));
  show("handler_passed", atomic_load(&g_handler_passed));
  show("b_size", file_size(path_b));
  return 0;
}

// A handler opening and closing a guarded file while its thread is in a guarded open or close.
static int case_handler_open_close(const char* path_a, const char* path_b, int rounds) {
  g_handler_path = path_b;
  start_timer(handler_open_close, 100);
  for (int i = 0; i < rounds; ++i) {
    int fd = open(path_a, O_WRONLY | O_CREAT | O_APPEND, 0644);
    (void)!write(fd, "a", 1);
    close(fd);
  }
  stop_timer();
  show("handler_calls", atomic_load(&g_handler_calls));
  show("a_size", file_size(path_a));
  show("b_size", file_size(path_b));
  return 0;
}

// ---------------------------------------------------------------- fork and vfork

// A "wb" descriptor shares its kernel offset with a forked child: the child moves it to 0 and exits;
// the parent's next write would land at 0.
static int case_fork_offset(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  show("header", write(fd, "0123456789", 10));
  pid_t child = fork();
  if (child == 0) {
    lseek(fd, 0, SEEK_SET);
    _exit(0);
  }
  waitpid(child, NULL, 0);
  show("parent_write", write(fd, "XY", 2));
  show("parent_seek_end", lseek(fd, 0, SEEK_END));
  show("parent_append", write(fd, "ZW", 2));
  close(fd);
  return 0;
}

// A forked child appends to the shared "wb" descriptor; the parent's next write is at the new end.
static int case_fork_child_appends(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  show("header", write(fd, "0123456789", 10));
  pid_t child = fork();
  if (child == 0) {
    _exit(write(fd, "cc", 2) == 2 ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  show("child_status", WEXITSTATUS(status));
  show("parent_write", write(fd, "pp", 2));
  close(fd);
  return 0;
}

// An open in a vfork child must not be recorded in the parent's table: the parent's next descriptor on
// that number (a socket) is not the child's file.
static int case_vfork_open(const char* path) {
  int made = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  (void)!write(made, "0123456789", 10);
  close(made);
  int probe = dup(0);
  close(probe);  // the lowest free number: what the child's open will get
  pid_t child = vfork();
  if (child == 0) {
    int fd = open(path, O_RDWR);  // position 0 of 10 bytes: a write there would be refused
    _exit(fd == probe ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  show("child_status", WEXITSTATUS(status));
  int sv[2];
  show("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
  show("same_number", sv[0] == probe);
  show("socket_write", write(sv[0], "p", 1));
  return 0;
}

// A thread makes the process's first report (loading the Python API, unwinding with libunwind) while
// the main thread forks; the grandchild then reports and opens a guarded file (which records the open's
// stack). Every grandchild must finish: none may wait for a lock the reporting thread held at the fork.
static const char* g_report_path;

static void* refused_write(void* arg) {
  (void)arg;
  int fd = open(g_report_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  (void)!write(fd, "0123456789", 10);
  (void)!pwrite(fd, "x", 1, 0);  // refused: a report
  close(fd);
  return NULL;
}

static int fork_while_first_report(const char* dir, int round) {
  char mine[4096];
  snprintf(mine, sizeof mine, "%s/t%d.safetensors", dir, round);
  g_report_path = mine;
  pthread_t thread;
  pthread_create(&thread, NULL, refused_write, NULL);
  for (volatile int spin = 0; spin < (round % 40) * 500; ++spin) {
  }
  pid_t grandchild = fork();
  if (grandchild == 0) {
    char other[4096];
    snprintf(other, sizeof other, "%s/g%d.safetensors", dir, round);
    int fd = open(other, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    (void)!write(fd, "0123456789", 10);
    (void)!pwrite(fd, "y", 1, 0);
    close(fd);
    _exit(0);
  }
  // libunwind blocks signals while it holds its locks: a hung grandchild is killed after 10 s.
  int status = 0;
  int waited_ms = 0;
  while (waitpid(grandchild, &status, WNOHANG) == 0) {
    if (waited_ms++ == 10000) {
      kill(grandchild, SIGKILL);
      waitpid(grandchild, &status, 0);
      break;
    }
    usleep(1000);
  }
  pthread_join(thread, NULL);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static int case_fork_during_first_report(const char* dir, int rounds) {
  int hung = 0;
  for (int i = 0; i < rounds; ++i) {
    pid_t child = fork();
    if (child == 0) _exit(fork_while_first_report(dir, i));
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++hung;
  }
  show("hung", hung);
  return 0;
}

// ---------------------------------------------------------------- descriptors received over a socket

// A child opens the file "wb", writes 10 bytes and passes the descriptor over a unix socket; the parent
// seeks to 0 and writes.
static int case_received_fd(const char* path) {
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  pid_t child = fork();
  if (child == 0) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    (void)!write(fd, "0123456789", 10);
    _exit(send_fd(sv[1], fd) == 1 ? 0 : 1);
  }
  int fd = receive_fd(sv[0]);
  waitpid(child, NULL, 0);
  show("received", fd >= 0 ? 0 : -1);
  show("seek", lseek(fd, 0, SEEK_SET));
  show("write_at_0", write(fd, "XY", 2));
  show("append", pwrite(fd, "Z", 1, 10));
  close(fd);
  return 0;
}

// ---------------------------------------------------------------- the kernel's own answers

static int case_negative_offsets(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  (void)!write(fd, "0123456789", 10);
  show("pwrite_minus_one", pwrite(fd, "x", 1, -1));
  show("ftruncate_minus_one", ftruncate(fd, -1));
  close(fd);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* c = argv[1];
  int rounds = argc > 4 ? atoi(argv[4]) : argc > 3 ? atoi(argv[3]) : 200;
  if (!strcmp(c, "close_race")) return case_close_race(argv[2], argv[3], rounds);
  if (!strcmp(c, "handler_pwrite")) return case_handler_pwrite(argv[2], argv[3], rounds);
  if (!strcmp(c, "handler_open_close")) return case_handler_open_close(argv[2], argv[3], rounds);
  if (!strcmp(c, "fork_offset")) return case_fork_offset(argv[2]);
  if (!strcmp(c, "fork_child_appends")) return case_fork_child_appends(argv[2]);
  if (!strcmp(c, "vfork_open")) return case_vfork_open(argv[2]);
  if (!strcmp(c, "received_fd")) return case_received_fd(argv[2]);
  if (!strcmp(c, "fork_during_first_report")) return case_fork_during_first_report(argv[2], rounds);
  if (!strcmp(c, "negative_offsets")) return case_negative_offsets(argv[2]);
  return 2;
}
