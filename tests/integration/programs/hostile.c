// The probe of test_hostile_conditions.py (third adversarial round): a guarded file under hostile process
// conditions. Each subcommand prints key=value lines.
//   cancel PATH              a thread cancelled inside its guarded write, then the main thread writes the
//                            same file (a watchdog alarm ends the process if that write waits forever)
//   cancel_close PATH        a thread cancelled at its close of a guarded descriptor (pending at the call:
//                            libc acts on it before the system call, so the descriptor stays open), then the
//                            main thread writes through it at 0 and at its end
//   implicit_close PATH HOW  an O_RDWR|O_CLOEXEC open, a deferred ftruncate to 8192, 10 bytes written, then
//                            the descriptor goes away by HOW: close, close_range, close_range_unshare,
//                            closefrom, dup2, dup3 or exec (of this program, which prints the size)
//   exec_env PATH HOW        10 bytes written to fd 3 (not close-on-exec), then the environment edited by
//                            HOW (keep, unsetenv_preload, clearenv, unsetenv_mode, mode_off, environ_null)
//                            and this program exec'ed to `pwrite0 3`
//   pwrite0 FD               pwrite(FD, "XY", 2, 0)
//   spool_gone PATH HOW      an O_RDWR|O_CREAT|O_EXCL open (spooled on a store without rename), 10 bytes,
//                            then the descriptor gone by HOW (close, close_range, closefrom, dup2): whether
//                            the name exists right after (uploaded then, not at exit)
//   fork_exclusive DIR N     a thread creating, closing and removing O_CREAT|O_EXCL files in a loop (each
//                            followed by a raw system call, which disarms it), while the main thread forks
//                            N children that each make one such file: how many did not exit within 2 s
//   dlclose LIB PATH         LIB dlopen'ed (not preloaded), its open and write called on PATH from the main
//                            thread and a thread, then dlclose'd; then a thread started and a raw system call
//   closefrom_unwinder DIR   a guarded open (libunwind starts: its pipe), closefrom(3), an unguarded log,
//                            config.txt read-only and out.txt opened on the numbers that pipe had, then a
//                            guarded open (its site unwound), then config.txt read and "out" written
//   spool_at_limit PATH      RLIMIT_NOFILE 32 (soft and hard), an O_RDWR|O_CREAT|O_EXCL open (spooled on a
//                            store without rename), 10 bytes, every other number filled with /dev/null, close
//   fsize PATH               RLIMIT_FSIZE 100 and a SIGXFSZ handler that counts: an O_RDWR open, 10 bytes,
//                            ftruncate to 1000 and posix_fallocate to 1000, then the limit lifted and a close
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "errno_text.h"
#include "show_result.h"

extern char** environ;

static int g_fd;
static atomic_int g_go;

static void* cancelled_writer(void* arg) {
  (void)arg;
  while (!atomic_load(&g_go)) {
  }
  // The cancellation is pending: write, a cancellation point, acts on it inside the guarded call.
  write(g_fd, "abcdefghij", 10);
  return NULL;
}

static int case_cancel(const char* path) {
  g_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  show("write", write(g_fd, "0123456789", 10));
  pthread_t thread;
  pthread_create(&thread, NULL, cancelled_writer, NULL);
  pthread_cancel(thread);
  atomic_store(&g_go, 1);
  void* result = NULL;
  pthread_join(thread, &result);
  show("cancelled", result == PTHREAD_CANCELED);
  alarm(10);  // the watchdog: SIGALRM ends a write that waits for a lock nobody will release
  show("write_after", write(g_fd, "XY", 2));
  show("pwrite_back", pwrite(g_fd, "Z", 1, 0));
  show("close", close(g_fd));
  return 0;
}

static void* cancelled_closer(void* arg) {
  (void)arg;
  while (!atomic_load(&g_go)) {
  }
  close(g_fd);
  return NULL;
}

static int case_cancel_close(const char* path) {
  g_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  show("write", write(g_fd, "0123456789", 10));
  pthread_t thread;
  pthread_create(&thread, NULL, cancelled_closer, NULL);
  pthread_cancel(thread);
  atomic_store(&g_go, 1);
  void* result = NULL;
  pthread_join(thread, &result);
  show("cancelled", result == PTHREAD_CANCELED);
  show("still_open", fcntl(g_fd, F_GETFD) >= 0);
  show("pwrite_back", pwrite(g_fd, "Z", 1, 0));
  show("write_after", write(g_fd, "XY", 2));
  show("close", close(g_fd));
  return 0;
}

static long size_of(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static int case_implicit_close(const char* self, const char* path, const char* how) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  show("ftruncate", ftruncate(fd, 8192));
  show("write", write(fd, "0123456789", 10));
  long result = 0;
  if (strcmp(how, "close") == 0) {
    result = close(fd);
  } else if (strcmp(how, "close_range") == 0) {
    result = close_range(fd, fd, 0);
  } else if (strcmp(how, "close_range_unshare") == 0) {
    result = close_range(fd, ~0U, CLOSE_RANGE_UNSHARE);
  } else if (strcmp(how, "closefrom") == 0) {
    closefrom(fd);
  } else if (strcmp(how, "dup2") == 0) {
    result = dup2(0, fd) == fd ? 0 : -1;
  } else if (strcmp(how, "dup3") == 0) {
    result = dup3(0, fd, O_CLOEXEC) == fd ? 0 : -1;
  } else if (strcmp(how, "exec") == 0) {
    execl(self, self, "size", path, (char*)NULL);
    result = -1;
  } else {
    fprintf(stderr, "unknown way %s\n", how);
    return 2;
  }
  show("gone", result);
  show("size", size_of(path));
  return 0;
}

static int case_exec_env(const char* self, const char* path, const char* how) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd != 3) {
    dup2(fd, 3);
    close(fd);
  }
  show("write", write(3, "0123456789", 10));
  if (strcmp(how, "unsetenv_preload") == 0) {
    unsetenv("LD_PRELOAD");
  } else if (strcmp(how, "clearenv") == 0) {
    clearenv();
  } else if (strcmp(how, "unsetenv_mode") == 0) {
    unsetenv("APPENDGUARD");
  } else if (strcmp(how, "mode_off") == 0) {
    setenv("APPENDGUARD", "off", 1);
  } else if (strcmp(how, "environ_null") == 0) {
    environ = NULL;
  } else if (strcmp(how, "keep") != 0) {
    fprintf(stderr, "unknown way %s\n", how);
    return 2;
  }
  execl(self, self, "pwrite0", "3", (char*)NULL);
  show("exec", -1);
  return 1;
}

static int case_spool_gone(const char* path, const char* how) {
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
  show("write", write(fd, "0123456789", 10));
  long result = 0;
  if (strcmp(how, "close") == 0) {
    result = close(fd);
  } else if (strcmp(how, "close_range") == 0) {
    result = close_range(fd, ~0U, 0);
  } else if (strcmp(how, "closefrom") == 0) {
    closefrom(fd);
  } else if (strcmp(how, "dup2") == 0) {
    result = dup2(0, fd) == fd ? 0 : -1;
  } else {
    fprintf(stderr, "unknown way %s\n", how);
    return 2;
  }
  show("gone", result);
  show("size_after", size_of(path));
  return 0;
}

static const char* g_dir;
static atomic_int g_stop;

static long raw_getpid(void) {
  long result;
  __asm__ volatile("syscall" : "=a"(result) : "a"(SYS_getpid) : "rcx", "r11", "memory");
  return result;
}

static void* exclusive_creator(void* arg) {
  (void)arg;
  char path[4096];
  for (long i = 0; !atomic_load(&g_stop); ++i) {
    snprintf(path, sizeof path, "%s/tmp%ld", g_dir, i % 16);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) close(fd);
    unlink(path);
    raw_getpid();  // trapped while this thread is armed: the trap disarms it, the next create arms it again
  }
  return NULL;
}

static int case_fork_exclusive(const char* dir, int rounds) {
  g_dir = dir;
  pthread_t thread;
  pthread_create(&thread, NULL, exclusive_creator, NULL);
  int hung = 0;
  for (int i = 0; i < rounds; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      char path[4096];
      snprintf(path, sizeof path, "%s/child%d", dir, (int)getpid());
      int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
      if (fd >= 0) close(fd);
      unlink(path);
      _exit(0);
    }
    int status = 0;
    int done = 0;
    for (int k = 0; k < 200 && !done; ++k) {
      if (waitpid(pid, &status, WNOHANG) == pid) {
        done = 1;
      } else {
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
      }
    }
    if (!done) {  // waiting with every signal blocked: only SIGKILL ends it
      ++hung;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
  }
  atomic_store(&g_stop, 1);
  pthread_join(thread, NULL);
  show("hung_children", hung);
  return 0;
}

typedef int (*OpenFunction)(const char*, int, ...);
typedef ssize_t (*WriteFunction)(int, const void*, size_t);
static OpenFunction g_open;
static WriteFunction g_write;
static const char* g_path;

static void* write_through_the_library(void* arg) {
  (void)arg;
  int fd = g_open(g_path, O_WRONLY | O_APPEND);
  g_write(fd, "t", 1);
  close(fd);
  return NULL;
}

static void* do_nothing(void* arg) {
  return arg;
}

static int case_dlclose(const char* library, const char* path) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    printf("dlopen=%s\n", dlerror());
    return 1;
  }
  g_open = (OpenFunction)dlsym(handle, "open");
  g_write = (WriteFunction)dlsym(handle, "write");
  g_path = path;
  int fd = g_open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  show("write", g_write(fd, "0123456789", 10));
  pthread_t thread;
  pthread_create(&thread, NULL, write_through_the_library, NULL);
  pthread_join(thread, NULL);
  close(fd);
  show("dlclose", dlclose(handle));
  pthread_create(&thread, NULL, do_nothing, NULL);
  pthread_join(thread, NULL);
  show("raw_getpid", raw_getpid() == getpid());
  show("size", size_of(path));
  return 0;
}

static int case_closefrom_unwinder(const char* dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/first.safetensors", dir);
  close(open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644));
  closefrom(3);
  snprintf(path, sizeof path, "%s/x.log", dir);
  int log = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  snprintf(path, sizeof path, "%s/config.txt", dir);
  int config = open(path, O_RDONLY);
  snprintf(path, sizeof path, "%s/out.txt", dir);
  int out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  snprintf(path, sizeof path, "%s/second.safetensors", dir);
  int guarded = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char text[64] = {0};
  show("config_read", read(config, text, sizeof text - 1));
  printf("config=%s", text);
  show("out_write", write(out, "out", 3));
  show("closes", close(log) | close(config) | close(out) | close(guarded));
  return 0;
}

static int case_spool_at_limit(const char* path) {
  struct rlimit limit = {32, 32};
  setrlimit(RLIMIT_NOFILE, &limit);
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
  show("write", write(fd, "0123456789", 10));
  int last = -1;
  for (int f; (f = open("/dev/null", O_RDONLY)) >= 0;) last = f;
  show("close", close(fd));
  show("size_after", size_of(path));
  for (int f = 3; f <= last; ++f) close(f);
  return 0;
}

static volatile sig_atomic_t g_xfsz;
static void count_xfsz(int sig) {
  (void)sig;
  ++g_xfsz;
}

static int case_fsize(const char* path) {
  signal(SIGXFSZ, count_xfsz);
  struct rlimit limit = {100, RLIM_INFINITY};
  setrlimit(RLIMIT_FSIZE, &limit);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  show("write", write(fd, "0123456789", 10));
  show("ftruncate", ftruncate(fd, 1000));
  show("xfsz_after_ftruncate", g_xfsz);
  int error = posix_fallocate(fd, 0, 1000);
  printf("posix_fallocate=%s\n", error == 0 ? "0" : errno_text(error));
  show("xfsz_after_fallocate", g_xfsz);
  show("ftruncate_within", ftruncate(fd, 50));
  limit.rlim_cur = RLIM_INFINITY;
  setrlimit(RLIMIT_FSIZE, &limit);
  show("close", close(fd));
  show("size", size_of(path));
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "cancel") == 0) return case_cancel(argv[2]);
  if (argc == 3 && strcmp(argv[1], "cancel_close") == 0) return case_cancel_close(argv[2]);
  if (argc == 4 && strcmp(argv[1], "implicit_close") == 0)
    return case_implicit_close(argv[0], argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "exec_env") == 0) return case_exec_env(argv[0], argv[2], argv[3]);
  if (argc == 3 && strcmp(argv[1], "fsize") == 0) return case_fsize(argv[2]);
  if (argc == 3 && strcmp(argv[1], "spool_at_limit") == 0) return case_spool_at_limit(argv[2]);
  if (argc == 3 && strcmp(argv[1], "closefrom_unwinder") == 0) return case_closefrom_unwinder(argv[2]);
  if (argc == 4 && strcmp(argv[1], "dlclose") == 0) return case_dlclose(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "fork_exclusive") == 0) return case_fork_exclusive(argv[2], atoi(argv[3]));
  if (argc == 4 && strcmp(argv[1], "spool_gone") == 0) return case_spool_gone(argv[2], argv[3]);
  if (argc == 3 && strcmp(argv[1], "size") == 0) {
    show("gone", 0);
    show("size", size_of(argv[2]));
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "pwrite0") == 0) {
    show("pwrite0", pwrite(atoi(argv[2]), "XY", 2, 0));
    return 0;
  }
  fprintf(stderr, "usage: hostile cancel|implicit_close|exec_env|size|pwrite0 ...\n");
  return 2;
}
