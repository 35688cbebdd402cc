// Descriptors and file identity (issue 24, items 2, 3, 4, 5, 7, 16) for test_descriptors.py: many guarded
// descriptors across exec, opens in a vfork child, a descriptor sent to itself or received from another
// process, the same file under another name, a deferred preallocation seen through another descriptor.
// Each subcommand prints key=value lines (see harness.results).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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

static int open_existing(const char* path, int flags) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "0123456789", 10) != 10) return -1;
  close(fd);
  return open(path, flags, 0644);
}

// ---------------------------------------------------------------- item 2: many descriptors across exec

// `count` guarded files opened O_RDWR (close-on-exec or not), then the target d/t.safetensors O_RDWR
// (inherited, position 0), then exec of this program, which writes at the inherited position 0.
static int case_many_carried(const char* dir, int count, int cloexec) {
  char path[4096];
  for (int i = 0; i < count; ++i) {
    snprintf(path, sizeof path, "%s/f%d.safetensors", dir, i);
    if (open(path, O_RDWR | O_CREAT | (cloexec ? O_CLOEXEC : 0), 0644) < 0) return 3;
  }
  snprintf(path, sizeof path, "%s/t.safetensors", dir);
  int fd = open_existing(path, O_RDWR);
  if (fd < 0) return 3;
  char number[16];
  snprintf(number, sizeof number, "%d", fd);
  show("target_fd", fd);
  execl("/proc/self/exe", "descriptors", "write_at_position", number, (char*)NULL);
  return 4;
}

static int case_write_at_position(int fd) {
  show("write_at_position", write(fd, "XY", 2));
  return 0;
}

// The same through vfork + execl, as Python's subprocess starts a child: the target is opened O_RDWR and
// close-on-exec, and the vfork child either makes it its stdout (dup2, then closes the original) or clears
// its close-on-exec flag; the new program writes at the inherited position (0) and exits 1 if the write
// is refused, 0 if it went through. The child's records are made in the vfork child, which shares our
// memory and cannot change our table (hooks_exec.cpp).
static int case_vfork_exec(const char* path, const char* how) {
  int fd = open_existing(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return 3;
  show("parent_pid", getpid());
  const int as_stdout = !strcmp(how, "stdout");
  char number[16];
  snprintf(number, sizeof number, "%d", as_stdout ? 1 : fd);
  pid_t child = vfork();
  if (child == 0) {
    if (as_stdout) {
      if (dup2(fd, 1) != 1) _exit(5);
      close(fd);
    } else if (fcntl(fd, F_SETFD, 0) != 0) {
      _exit(5);
    }
    execl("/proc/self/exe", "descriptors", "write_or_fail", number, (char*)NULL);
    _exit(4);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child) return 3;
  show("child_status", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  return 0;
}

// The exec made by a thread of `stack_bytes` (a guard page below): the target is carried as in
// many_carried, whatever the environment's size (the program's environment is copied with the carried
// value added: not on this thread's stack).
static const char* g_exec_path;
static void* exec_in_thread(void* arg) {
  (void)arg;
  int fd = open_existing(g_exec_path, O_RDWR);
  if (fd < 0) return NULL;
  char number[16];
  snprintf(number, sizeof number, "%d", fd);
  execl("/proc/self/exe", "descriptors", "write_at_position", number, (char*)NULL);
  return NULL;
}

static int case_exec_in_small_thread(const char* path, size_t stack_bytes) {
  g_exec_path = path;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (pthread_attr_setstacksize(&attr, stack_bytes) != 0) return 5;
  pthread_t thread;
  if (pthread_create(&thread, &attr, exec_in_thread, NULL) != 0) return 6;
  pthread_join(thread, NULL);
  return 4;  // the exec failed
}

static int case_write_or_fail(int fd) {
  return write(fd, "XY", 2) == 2 ? 0 : 1;
}

// ---------------------------------------------------------------- item 3: opens in a vfork child

static int vfork_child_writes(const char* path) {
  int fd = open(path, O_RDWR);
  if (fd < 0) _exit(3);
  ssize_t n = pwrite(fd, "XY", 2, 0);
  _exit(n == 2 ? 0 : n < 0 && errno == EOPNOTSUPP ? 1 : 2);
}

static int clone_child(void* arg) {
  return vfork_child_writes(arg);
}

static int case_vfork_child_pwrite(const char* path, const char* how) {
  if (open_existing(path, O_WRONLY) < 0) return 3;
  pid_t child;
  if (!strcmp(how, "vfork")) {
    child = vfork();
    if (child == 0) vfork_child_writes(path);
  } else {
    static char stack[256 * 1024];
    child = clone(clone_child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, (void*)path);
  }
  int status = 0;
  waitpid(child, &status, 0);
  show("child_status", WIFEXITED(status) ? WEXITSTATUS(status) : 100);
  return 0;
}

// ---------------------------------------------------------------- items 4, 16: descriptors over a socket

// The process's own rewritten O_RDWR descriptor (position 0) sent to itself: the received number is the
// same open file description, so its write at 0 is refused and its append moves the first one's position.
static int case_self_sent(const char* path) {
  int fd = open_existing(path, O_RDWR);
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  send_fd(sv[1], fd);
  int received = receive_fd(sv[0]);
  show("received", received >= 0 ? 0 : -1);
  show("seek", lseek(received, 0, SEEK_SET));
  show("write_at_0", write(received, "XY", 2));
  show("seek_end", lseek(received, 0, SEEK_END));
  show("append", write(received, "AB", 2));
  show("first_position", lseek(fd, 0, SEEK_CUR));
  show("first_write_at_end", write(fd, "C", 1));
  return 0;
}

// Another process opens the file O_RDWR (rewritten into an append by its appendguard) and sends it: the
// kernel shows O_APPEND, and what that process asked for is not known here.
static int case_received_rewritten(const char* path) {
  if (open_existing(path, O_WRONLY) < 0) return 3;
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  pid_t child = fork();
  if (child == 0) {
    int fd = open(path, O_RDWR);
    _exit(send_fd(sv[1], fd) == 1 ? 0 : 1);
  }
  int fd = receive_fd(sv[0]);
  waitpid(child, NULL, 0);
  show("received", fd >= 0 ? 0 : -1);
  show("seek", lseek(fd, 0, SEEK_SET));
  show("write_at_0", write(fd, "XY", 2));
  return 0;
}

// ---------------------------------------------------------------- item 5: the same file under another name

// `guarded` is open O_RDWR (tracked); `alias` names the same file (a hard link or a symlink with an
// unguarded name, or "proc" for /proc/self/fd/N). An append through the alias moves the tracked end, and a
// pwrite at 0 through the alias is refused.
static int case_alias(const char* guarded, const char* alias) {
  int fd = open_existing(guarded, O_RDWR);
  char proc[64];
  if (!strcmp(alias, "proc")) {
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    alias = proc;
  }
  int other = open(alias, O_WRONLY | O_APPEND);
  show("alias_append", write(other, "ABC", 3));
  close(other);
  show("seek_end", lseek(fd, 0, SEEK_END));
  show("append_at_end", write(fd, "D", 1));
  other = open(alias, O_WRONLY);
  show("alias_pwrite_at_0", pwrite(other, "XY", 2, 0));
  show("alias_write_at_end", pwrite(other, "E", 1, 14));
  close(other);
  show("seek_end_after", lseek(fd, 0, SEEK_END));
  return 0;
}

// ---------------------------------------------------------------- item 7: a deferred preallocation

// ftruncate(8192) deferred, 10 bytes written, then the same file opened read-only: its size, a pread at
// 5000 and a MAP_SHARED mapping read at 5000 (SIGBUS past the end of file).
static int case_prealloc_reader(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  show("ftruncate", ftruncate(fd, 8192));
  show("write", write(fd, "0123456789", 10));
  int reader = open(path, O_RDONLY);
  struct stat st;
  fstat(reader, &st);
  show("reader_size", (long)st.st_size);
  char buf[16] = {1};
  show("pread_5000", pread(reader, buf, 16, 5000));
  show("pread_byte", buf[0]);
  unsigned char* map = mmap(NULL, 8192, PROT_READ, MAP_SHARED, reader, 0);
  if (map == MAP_FAILED) return 3;
  pid_t child = fork();
  if (child == 0) _exit(map[5000] == 0 ? 0 : 1);  // a SIGBUS kills only the child
  int status = 0;
  waitpid(child, &status, 0);
  show("map_read", WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
  show("write_after", write(fd, "ab", 2));
  close(reader);
  close(fd);
  return 0;
}

// ---------------------------------------------------------------- issue 27: exec with many descriptors

// `count` inherited descriptors of an unguarded file (dups of one), one inherited guarded descriptor,
// then `rounds` fork + exec of /bin/true; prints the mean time of one in microseconds.
static int case_exec_many(const char* dir, int count, int rounds) {
  char path[4096];
  snprintf(path, sizeof path, "%s/u.bin", dir);
  int unguarded = open(path, O_WRONLY | O_CREAT, 0644);
  for (int i = 0; i < count; ++i) {
    if (dup(unguarded) < 0) return 3;
  }
  snprintf(path, sizeof path, "%s/t.safetensors", dir);
  if (open_existing(path, O_RDWR) < 0) return 3;
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (int i = 0; i < rounds; ++i) {
    pid_t child = fork();
    if (child == 0) {
      execl("/bin/true", "true", (char*)NULL);
      _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  double us = ((double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec)) / 1e3;
  printf("fork_exec_us=%.1f\n", us / rounds);
  return 0;
}

// ---------------------------------------------------------------- issue 27: memory per tracked file

static long rss_kb(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f)) {
    if (!strncmp(line, "VmRSS:", 6)) kb = atol(line + 6);
  }
  if (f) fclose(f);
  return kb;
}

// `count` guarded files opened at once (written, so tracked as usual), then all closed: VmRSS before,
// with them open and after.
static int case_memory(const char* dir, int count) {
  struct rlimit limit;
  getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur != RLIM_INFINITY && (rlim_t)count + 64 > limit.rlim_cur)
    count = (int)limit.rlim_cur - 64;
  show("files", count);
  int* fds = calloc((size_t)count, sizeof(int));
  char path[4096];
  show("rss_before_kb", rss_kb());
  for (int i = 0; i < count; ++i) {
    snprintf(path, sizeof path, "%s/m%d.safetensors", dir, i);
    fds[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fds[i] < 0 || write(fds[i], "x", 1) != 1) return 3;
  }
  show("rss_open_kb", rss_kb());
  for (int i = 0; i < count; ++i) close(fds[i]);
  show("rss_closed_kb", rss_kb());
  free(fds);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* c = argv[1];
  if (!strcmp(c, "many_carried"))
    return case_many_carried(argv[2], atoi(argv[3]), !strcmp(argv[4], "cloexec"));
  if (!strcmp(c, "write_at_position")) return case_write_at_position(atoi(argv[2]));
  if (!strcmp(c, "vfork_exec")) return case_vfork_exec(argv[2], argv[3]);
  if (!strcmp(c, "write_or_fail")) return case_write_or_fail(atoi(argv[2]));
  if (!strcmp(c, "exec_in_small_thread"))
    return case_exec_in_small_thread(argv[2], strtoul(argv[3], NULL, 0));
  if (!strcmp(c, "vfork_child_pwrite")) return case_vfork_child_pwrite(argv[2], argv[3]);
  if (!strcmp(c, "self_sent")) return case_self_sent(argv[2]);
  if (!strcmp(c, "received_rewritten")) return case_received_rewritten(argv[2]);
  if (!strcmp(c, "alias")) return case_alias(argv[2], argv[3]);
  if (!strcmp(c, "prealloc_reader")) return case_prealloc_reader(argv[2]);
  if (!strcmp(c, "memory")) return case_memory(argv[2], atoi(argv[3]));
  if (!strcmp(c, "exec_many")) return case_exec_many(argv[2], atoi(argv[3]), atoi(argv[4]));
  return 2;
}
