// The numbers of held write sessions (APPENDGUARD_REOPEN=hold): what the program can do with a number it
// closed while the library keeps the descriptor open. Run by test_held_numbers.py.
//
//   held_numbers during_commit DIR CALL ROUNDS: each round holds one file; while the committer thread
//     (APPENDGUARD_HOLD_SECONDS=1) is between taking its session and closing its number (made 100 ms
//     long by slow_thread_close.so), the program installs a descriptor of its own there: CALL is dup2
//     or dup3 (a pipe onto the number), close_range or closefrom (over the number, then a dup of the
//     pipe, which gets the lowest free number). That descriptor is the program's: afterwards it must
//     still be open and still the pipe. Prints rounds=N and lost=N (closed behind the program's back).
//     CALL write: a write to the number meanwhile must fail EBADF (lost counts those that did not).
//   held_numbers use_after_close DIR: writes "HEAD" to DIR/uac.safetensors, closes it (held), then calls
//     every descriptor function on the closed number; each line is NAME=RESULT errno=E.
//   held_numbers committer_at_open DIR: the committer thread exists after the first open that starts a
//     held session, before any close; a held close in a signal handler then creates none. Prints
//     threads_before, threads_after_open, threads_after_handler_close.
//   held_numbers vfork_exit DIR: holds a file, starts a vfork child that _exits without exec, then
//     reopens the file and appends "TAIL".
//   held_numbers fork_close DIR: holds a file, forks; the child writes to and closes the held number.
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int held_file(const char* dir, int round, int i) {
  char path[4096];
  snprintf(path, sizeof path, "%s/r%d-%d.safetensors", dir, round, i);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "HEADER", 6) != 6 || close(fd) != 0) {
    perror(path);
    exit(2);
  }
  return fd;  // held: the number stays open, the program believes it closed
}

static int is_the_pipe(int fd, const struct stat* pipe_stat) {
  struct stat st;
  return fcntl(fd, F_GETFD) >= 0 && fstat(fd, &st) == 0 && st.st_ino == pipe_stat->st_ino &&
         st.st_dev == pipe_stat->st_dev;
}

// The committer thread's close of `fd` has begun (slow_thread_close.c keeps it waiting 100 ms): the
// session is out of the set and its number not yet closed.
static void wait_for_committer_close(int fd) {
  int* slow = (int*)dlsym(RTLD_DEFAULT, "slow_close_fd");
  if (!slow) {
    fprintf(stderr, "slow_thread_close.so is not preloaded\n");
    exit(2);
  }
  double deadline = now_s() + 10;
  while (__atomic_load_n(slow, __ATOMIC_ACQUIRE) != fd) {
    if (now_s() > deadline) {
      fprintf(stderr, "the committer did not close fd %d\n", fd);
      exit(2);
    }
    struct timespec pause = {0, 100 * 1000};
    nanosleep(&pause, NULL);
  }
}

static int during_commit(const char* dir, const char* call, int rounds) {
  int p[2];
  if (pipe(p) != 0) return 2;
  struct stat pipe_stat;
  fstat(p[1], &pipe_stat);
  int lost = 0;
  for (int round = 0; round < rounds; ++round) {
    int held = held_file(dir, round, 0);
    wait_for_committer_close(held);
    int mine = held;  // the number the program then owns
    if (strcmp(call, "dup2") == 0) {
      if (dup2(p[1], held) != held) return 2;
    } else if (strcmp(call, "dup3") == 0) {
      if (dup3(p[1], held, O_CLOEXEC) != held) return 2;
    } else if (strcmp(call, "close_range") == 0 || strcmp(call, "closefrom") == 0) {
      // The program closes the range (the held number is closed for it already), then gets a new
      // descriptor, the lowest free number: the held one once it is really closed.
      if (strcmp(call, "close_range") == 0) {
        if (close_range((unsigned)held, (unsigned)held, 0) != 0) return 2;
      } else {
        closefrom(held);
      }
      mine = dup(p[1]);
    } else if (strcmp(call, "write") == 0) {
      // A write to the closed number while it is being committed: EBADF, as at any other time.
      errno = 0;
      if (write(held, "X", 1) != -1 || errno != EBADF) ++lost;
      continue;
    } else {
      return 2;
    }
    // Give the committer's close time to happen (it waits 100 ms).
    struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
    if (!is_the_pipe(mine, &pipe_stat)) {
      ++lost;
    } else {
      close(mine);
    }
  }
  printf("rounds=%d\nlost=%d\n", rounds, lost);
  return 0;
}

static void said(const char* name, long result) {
  printf("%s=%ld errno=%d\n", name, result, result < 0 ? errno : 0);
}

static int use_after_close(const char* dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/uac.safetensors", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "HEAD", 4) != 4) return 2;
  said("close", close(fd));
  char buf[16] = "XXXX";
  struct iovec iov = {buf, 4};
  struct stat st;
  errno = 0;
  said("write", write(fd, buf, 4));
  said("pwrite", pwrite(fd, buf, 4, 4));
  said("writev", writev(fd, &iov, 1));
  said("pwritev", pwritev(fd, &iov, 1, 4));
  said("read", read(fd, buf, 4));
  said("pread", pread(fd, buf, 4, 0));
  said("lseek", lseek(fd, 0, SEEK_END));
  said("ftruncate", ftruncate(fd, 0));
  said("fallocate", fallocate(fd, 0, 0, 100));
  long pf = posix_fallocate(fd, 0, 100);
  printf("posix_fallocate=%ld\n", pf);
  said("fsync", fsync(fd));
  said("fdatasync", fdatasync(fd));
  said("fstat", fstat(fd, &st));
  said("dup", dup(fd));
  said("dup2", dup2(fd, 200));
  said("dup3", dup3(fd, 201, 0));
  said("fcntl_getfd", fcntl(fd, F_GETFD));
  said("fcntl_dupfd", fcntl(fd, F_DUPFD, 300));
  void* map = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
  said("mmap", map == MAP_FAILED ? -1 : 0);
  void* anonymous = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, fd, 0);
  said("mmap_anonymous", anonymous == MAP_FAILED ? -1 : 0);
  said("dprintf", dprintf(fd, "XXXX"));
  FILE* stream = fdopen(fd, "w");
  said("fdopen", stream ? 0 : -1);
  said("close_again", close(fd));
  // A new file may take the number only after the library really closed it: the session stays held.
  return 0;
}

static int count_threads(void) {
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

static volatile int g_handler_fd = -1;
static volatile long g_handler_close = 1;

static void close_in_handler(int signal_number) {
  (void)signal_number;
  g_handler_close = close(g_handler_fd);
}

static int committer_at_open(const char* dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/thread.safetensors", dir);
  printf("threads_before=%d\n", count_threads());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "HEAD", 4) != 4) return 2;
  printf("threads_after_open=%d\n", count_threads());
  g_handler_fd = fd;
  signal(SIGUSR1, close_in_handler);
  raise(SIGUSR1);
  printf("handler_close=%ld\n", g_handler_close);
  printf("threads_after_handler_close=%d\n", count_threads());
  return 0;
}

// A held file, a vfork child that _exits without exec (its exit closes its copy of the held descriptor:
// a FLUSH), then a reopen that appends: the session must not be reused.
static int vfork_exit(const char* dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/vfork.safetensors", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "HEAD", 4) != 4 || close(fd) != 0) return 2;
  pid_t pid = vfork();
  if (pid == 0) _exit(0);
  if (pid < 0 || waitpid(pid, NULL, 0) != pid) return 2;
  int again = open(path, O_WRONLY);
  if (again < 0 || lseek(again, 0, SEEK_END) != 4 || write(again, "TAIL", 4) != 4 || close(again) != 0)
    return 2;
  printf("vfork_exit=done\n");
  return 0;
}

// A held file and a fork child: the child's copy of the held number is not the program's (it closed it
// before the fork): a write to it fails EBADF, and its close fails EBADF too but really closes the copy.
static int fork_close(const char* dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/fork.safetensors", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "HEAD", 4) != 4 || close(fd) != 0) return 2;
  pid_t pid = fork();
  if (pid == 0) {
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    printf("child_inherited=%d\n", readlink(link, target, sizeof target) > 0);
    said("child_write", write(fd, "X", 1));
    said("child_close", close(fd));
    printf("child_still_open=%d\n", readlink(link, target, sizeof target) > 0);
    _exit(0);
  }
  if (pid < 0 || waitpid(pid, NULL, 0) != pid) return 2;
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc >= 5 && strcmp(argv[1], "during_commit") == 0)
    return during_commit(argv[2], argv[3], atoi(argv[4]));
  if (argc >= 3 && strcmp(argv[1], "use_after_close") == 0) return use_after_close(argv[2]);
  if (argc >= 3 && strcmp(argv[1], "committer_at_open") == 0) return committer_at_open(argv[2]);
  if (argc >= 3 && strcmp(argv[1], "vfork_exit") == 0) return vfork_exit(argv[2]);
  if (argc >= 3 && strcmp(argv[1], "fork_close") == 0) return fork_close(argv[2]);
  fprintf(stderr,
          "usage: held_numbers during_commit DIR CALL ROUNDS | use_after_close DIR | committer_at_open DIR | "
          "vfork_exit DIR\n");
  return 2;
}
