// System calls made without libc (a `syscall` instruction of this program), for test_raw_syscalls.py.
// Usage: raw_syscalls CASE DIR. Each case prints key=value lines: a raw call's result is the kernel's
// (a negative errno for a failure). Every case first opens DIR/witness.safetensors through libc, so that
// the process has a guarded file open (APPENDGUARD_SYSCALLS=auto traps raw calls only then).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static long raw6(long n, long a, long b, long c, long d, long e, long f) {
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}
#define RAW(n, ...) raw_args(n, __VA_ARGS__, 0, 0, 0, 0, 0, 0)
#define raw_args(n, a, b, c, d, e, f, ...) \
  raw6(n, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))

static const char* dir;
static char path_buffers[2][4096];
static int next_buffer;

static const char* in_dir(const char* name) {
  char* path = path_buffers[next_buffer++ % 2];
  snprintf(path, sizeof path_buffers[0], "%s/%s", dir, name);
  return path;
}

// A guarded file with 4 bytes, through libc: the process now writes guarded files.
static int witness(void) {
  int fd = open(in_dir("witness.safetensors"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "abcd", 4) != 4) {
    perror("witness");
    exit(3);
  }
  return fd;
}

// An existing guarded file with 4 bytes, closed.
static void existing(const char* name) {
  int fd = open(in_dir(name), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "wxyz", 4) != 4 || close(fd) != 0) {
    perror("existing");
    exit(3);
  }
}

// A raw open of an existing guarded file for reading and writing, then a raw write at 0 and a raw write at
// the position: refused and appended when the layer guards them.
static int open_and_write(const char* tag) {
  existing("existing.safetensors");
  long fd = RAW(SYS_openat, AT_FDCWD, in_dir("existing.safetensors"), O_RDWR);
  printf("%s_openat=%s\n", tag, fd >= 0 ? "ok" : "failed");
  if (fd < 0) return 1;
  long at_zero = RAW(SYS_pwrite64, fd, "0000", 4, 0);
  long at_position = RAW(SYS_write, fd, "5555", 4);
  long end = RAW(SYS_lseek, fd, 0, SEEK_END);
  long at_end = RAW(SYS_write, fd, "6666", 4);
  printf("%s_pwrite64_at_0=%ld\n%s_write_at_0=%ld\n%s_lseek_end=%ld\n%s_write_at_end=%ld\n", tag, at_zero,
         tag, at_position, tag, end, tag, at_end);
  RAW(SYS_close, fd);
  return at_zero == -EOPNOTSUPP ? 0 : 1;
}

static void* thread_writes(void* fd) {
  long result = RAW(SYS_pwrite64, (long)(intptr_t)fd, "0000", 4, 0);
  return (void*)(intptr_t)result;
}

// A raw renameat of DIR/NAME.tmp to DIR/NAME (created first): seen, and then traced with
// "(raw system call)", only if this thread's raw calls are trapped.
static long raw_rename(const char* name) {
  char from[4096];
  snprintf(from, sizeof from, "%s/%s.tmp", dir, name);
  return RAW(SYS_renameat, AT_FDCWD, from, AT_FDCWD, in_dir(name));
}
static void rename_source(const char* name) {
  char from[4096];
  snprintf(from, sizeof from, "%s/%s.tmp", dir, name);
  int fd = open(from, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || close(fd) != 0) {
    perror("rename source");
    exit(3);
  }
}

// Worker threads of the auto cases (APPENDGUARD_SYSCALLS=auto traps only the threads that opened or
// created a guarded file).
static int shared_fd = -1;
static sem_t opened, closed;
static long results_of[8];

static void* opens_its_own(void* unused) {  // opens a guarded file itself, then a raw write at 0
  (void)unused;
  int fd = open(in_dir("worker.safetensors"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "abcd", 4) != 4) return (void*)1;
  results_of[0] = RAW(SYS_pwrite64, fd, "0000", 4, 0);
  close(fd);
  return NULL;
}

static void* opens_a_second_description(void* unused) {  // opens the main thread's file again
  (void)unused;
  int fd = open(in_dir("witness.safetensors"), O_WRONLY);
  if (fd < 0) return (void*)1;
  results_of[1] = RAW(SYS_pwrite64, fd, "1111", 4, 0);
  close(fd);
  return NULL;
}

static void* opened_nothing(void* unused) {  // a raw write at 0 on the main thread's descriptor
  (void)unused;
  results_of[2] = RAW(SYS_pwrite64, shared_fd, "2222", 4, 0);
  results_of[3] = raw_rename("nothing.safetensors");
  return NULL;
}

static void* holds_then_renames(void* unused) {  // opens, renames; another thread closes; renames twice
  (void)unused;
  shared_fd = open(in_dir("held.safetensors"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  results_of[4] = raw_rename("while_open.safetensors");
  sem_post(&opened);
  sem_wait(&closed);
  results_of[5] = raw_rename("first_after_close.safetensors");
  results_of[6] = raw_rename("second_after_close.safetensors");
  return NULL;
}

static void* closes_its_own(void* unused) {  // opens, closes, renames
  (void)unused;
  int fd = open(in_dir("own.safetensors"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || close(fd) != 0) return (void*)1;
  results_of[7] = raw_rename("after_own_close.safetensors");
  return NULL;
}

static void* forks_its_own(void* unused) {  // opens a guarded file, forks: the child writes at 0
  (void)unused;
  int fd = open(in_dir("forked.safetensors"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "abcd", 4) != 4) return (void*)1;
  long pid = RAW(SYS_fork, 0);
  if (pid == 0) _exit(RAW(SYS_pwrite64, fd, "0000", 4, 0) == -EOPNOTSUPP ? 0 : 1);
  int status = 0;
  waitpid((pid_t)pid, &status, 0);
  results_of[0] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return NULL;
}

static void* creates_exclusive(void* unused) {  // O_CREAT|O_EXCL of an unguarded name, kept open, renamed
  (void)unused;
  int fd = open(in_dir("exclusive.safetensors.tmp"), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return (void*)1;
  results_of[0] = raw_rename("exclusive.safetensors");
  return NULL;
}

static int run_thread(void* (*routine)(void*)) {
  pthread_t thread;
  void* result = NULL;
  if (pthread_create(&thread, NULL, routine, NULL) != 0) return 3;
  pthread_join(thread, &result);
  return result ? 3 : 0;
}

static volatile sig_atomic_t own_sigsys = 0;
static void own_handler(int sig, siginfo_t* info, void* context) {
  (void)sig;
  (void)context;
  own_sigsys = info->si_code == SI_TKILL || info->si_code == SI_USER ? own_sigsys + 1 : -100;
}

// dispatch_state: each thread's Syscall User Dispatch as the kernel has it, read by a tracer (the parent)
// with PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG (Linux 6.4+). The target (this program exec'd again, a
// fresh load of the library) stops at each stage, writes its main thread's and a worker's ids on a pipe
// and waits for the tracer's byte.
#define GET_SUD_CONFIG 0x4211 /* PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG */
struct sud_config {
  uint64_t mode, selector, offset, len;
};
static int to_tracer = -1, from_tracer = -1;
static volatile long worker_tid = 0;
static sem_t worker_done;
static sem_t worker_go, worker_went;
static volatile int worker_fd = -1;
static void* worker_waits(void* unused) {  // opens a guarded file, later makes one raw call
  (void)unused;
  worker_tid = syscall(SYS_gettid);
  sem_wait(&worker_go);
  worker_fd = open(in_dir("worker_state.safetensors"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  sem_post(&worker_went);
  sem_wait(&worker_go);
  RAW(SYS_getppid, 0);
  sem_post(&worker_went);
  sem_wait(&worker_done);
  return NULL;
}
static void tell_and_wait(void) {
  long ids[2] = {(long)getpid(), worker_tid};
  char go;
  if (write(to_tracer, ids, sizeof ids) != (ssize_t)sizeof ids || read(from_tracer, &go, 1) != 1) _exit(4);
}
static int dispatch_target(void) {
  pthread_t worker;
  sem_init(&worker_done, 0, 0);
  sem_init(&worker_go, 0, 0);
  sem_init(&worker_went, 0, 0);
  if (pthread_create(&worker, NULL, worker_waits, NULL) != 0) return 3;
  while (!worker_tid) usleep(1000);
  tell_and_wait();  // nothing opened
  int fd = open(in_dir("state.safetensors"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 3;
  tell_and_wait();  // the main thread holds a guarded file
  close(fd);
  tell_and_wait();  // and closed it: none left
  sem_post(&worker_go);
  sem_wait(&worker_went);
  if (worker_fd < 0) return 3;
  tell_and_wait();  // the worker holds a guarded file
  close(worker_fd);
  tell_and_wait();  // the main thread closed it: the worker releases itself at its next trap
  sem_post(&worker_go);
  sem_wait(&worker_went);
  tell_and_wait();  // the worker's raw call was trapped, and it released itself
  sem_post(&worker_done);
  pthread_join(worker, NULL);
  return 0;
}
static const char* mode_name(pid_t tid) {
  struct sud_config config;
  memset(&config, 0, sizeof config);
  if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) return "seize-failed";
  int status;
  if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0 || waitpid(tid, &status, __WALL) != tid) return "stop-failed";
  long got = ptrace((enum __ptrace_request)GET_SUD_CONFIG, tid, (void*)sizeof config, &config);
  ptrace(PTRACE_DETACH, tid, 0, 0);
  if (got != 0) return "get-failed";
  return config.mode == 0 ? "off" : config.mode == 1 ? "on" : "?";
}
static int dispatch_tracer(char* self) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return 3;
  pid_t child = fork();
  if (child == 0) {
    char fds[32];
    snprintf(fds, sizeof fds, "%d,%d", up[1], down[0]);
    char* args[] = {self, "dispatch_target", (char*)dir, fds, NULL};
    execv(self, args);
    _exit(3);
  }
  const char* names[] = {"start", "open", "closed", "worker_open", "main_closed", "worker_trapped"};
  for (int i = 0; i < 6; ++i) {
    long ids[2];
    if (read(up[0], ids, sizeof ids) != (ssize_t)sizeof ids) return 3;
    printf("%s_main=%s\n", names[i], mode_name((pid_t)ids[0]));
    printf("%s_worker=%s\n", names[i], mode_name((pid_t)ids[1]));
    if (write(down[1], "g", 1) != 1) return 3;
  }
  int status;
  waitpid(child, &status, 0);
  printf("target_status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* which = argv[1];
  dir = argv[2];
  setvbuf(stdout, NULL, _IONBF, 0);
  if (!strcmp(which, "pwrite")) {
    int fd = witness();
    printf("pwrite64_at_0=%ld\n", RAW(SYS_pwrite64, fd, "0000", 4, 0));
    printf("pwrite64_at_end=%ld\n", RAW(SYS_pwrite64, fd, "efgh", 4, 4));
    return 0;
  }
  if (!strcmp(which, "seccomp_exec")) {  // a seccomp policy refusing the layer's prctl, then CASE argv[3]
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_prctl, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 59 /* PR_SET_SYSCALL_USER_DISPATCH */, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
      perror("seccomp");
      return 3;
    }
    char* args[] = {argv[0], argc > 3 ? argv[3] : "pwrite", (char*)dir, NULL};
    execv(argv[0], args);
    return 3;
  }
  if (!strcmp(which, "nothing")) return 0;  // opens no guarded file
  // Three guarded opens and closes, then a fork child's two.
  if (!strcmp(which, "opens_then_forks")) {
    for (int i = 0; i < 3; ++i) close(witness());
    pid_t pid = fork();
    if (pid == 0) {
      close(witness());
      close(witness());
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("child_status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
  }
  if (!strcmp(which, "dispatch_state")) return dispatch_tracer(argv[0]);
  if (!strcmp(which, "dispatch_target") && argc > 3 &&
      sscanf(argv[3], "%d,%d", &to_tracer, &from_tracer) == 2)
    return dispatch_target();
  if (!strcmp(which, "libc_syscall")) {  // libc's syscall() function, not an instruction of ours
    int fd = witness();
    long result = syscall(SYS_pwrite64, fd, "0000", 4, 0);
    printf("syscall_pwrite64_at_0=%ld errno=%d\n", result, result < 0 ? errno : 0);
    printf("syscall_getppid_ok=%d\n", syscall(SYS_getppid) == getppid());
    return 0;
  }
  if (!strcmp(which, "openat")) {
    witness();
    open_and_write("raw");
    return 0;
  }
  if (!strcmp(which, "cold_openat")) {  // no guarded file open before
    open_and_write("raw");
    return 0;
  }
  if (!strcmp(which, "rename")) {
    witness();
    existing("model.safetensors.tmp");
    printf("renameat=%ld\n", RAW(SYS_renameat, AT_FDCWD, in_dir("model.safetensors.tmp"), AT_FDCWD,
                                 in_dir("model.safetensors")));
    return 0;
  }
  if (!strcmp(which, "clone3") || !strcmp(which, "fork") || !strcmp(which, "libc_fork") ||
      !strcmp(which, "clone")) {
    witness();
    long pid;
    if (!strcmp(which, "clone3")) {
      struct clone_args args;
      memset(&args, 0, sizeof args);
      args.exit_signal = SIGCHLD;
      pid = RAW(SYS_clone3, &args, sizeof args);
    } else if (!strcmp(which, "clone")) {
      pid = RAW(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    } else if (!strcmp(which, "fork")) {
      pid = RAW(SYS_fork, 0);
    } else {
      pid = fork();
    }
    if (pid == 0) _exit(open_and_write("child"));
    if (pid < 0) {
      printf("%s=%ld\n", which, pid);
      return 1;
    }
    int status = 0;
    waitpid((pid_t)pid, &status, 0);
    printf("child_status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
  }
  if (!strcmp(which, "io_uring")) {
    witness();
    unsigned char params[120];
    memset(params, 0, sizeof params);
    long ring = RAW(SYS_io_uring_setup, 8, params);
    printf("io_uring_setup=%ld\n", ring < 0 ? ring : 0L);
    return 0;
  }
  if (!strcmp(which, "thread")) {
    int fd = witness();
    pthread_t thread;
    void* result = NULL;
    if (pthread_create(&thread, NULL, thread_writes, (void*)(intptr_t)fd) != 0) return 3;
    pthread_join(thread, &result);
    printf("thread_pwrite64_at_0=%ld\n", (long)(intptr_t)result);
    return 0;
  }
  if (!strcmp(which, "thread_opens")) {  // threads that open guarded files, and one that opens none
    shared_fd = witness();
    rename_source("nothing.safetensors");
    if (run_thread(opens_its_own) || run_thread(opens_a_second_description) || run_thread(opened_nothing))
      return 3;
    printf(
        "own_pwrite64_at_0=%ld\nsecond_pwrite64_at_0=%ld\nnothing_pwrite64_at_0=%ld\n"
        "nothing_renameat=%ld\n",
        results_of[0], results_of[1], results_of[2], results_of[3]);
    return 0;
  }
  if (!strcmp(which, "release")) {  // a trapping thread stops trapping once no guarded file is left
    const char* names[] = {"while_open.safetensors", "first_after_close.safetensors",
                           "second_after_close.safetensors", "after_own_close.safetensors"};
    for (int i = 0; i < 4; ++i) rename_source(names[i]);
    sem_init(&opened, 0, 0);
    sem_init(&closed, 0, 0);
    pthread_t holder;
    if (pthread_create(&holder, NULL, holds_then_renames, NULL) != 0) return 3;
    sem_wait(&opened);
    close(shared_fd);  // the last guarded file, closed by another thread than the one it traps
    sem_post(&closed);
    pthread_join(holder, NULL);
    if (run_thread(closes_its_own)) return 3;
    printf("while_open=%ld\nfirst_after_close=%ld\nsecond_after_close=%ld\nafter_own_close=%ld\n",
           results_of[4], results_of[5], results_of[6], results_of[7]);
    return 0;
  }
  if (!strcmp(which, "exclusive")) {  // run with only *.safetensors guarded: the .tmp files are not
    if (run_thread(creates_exclusive)) return 3;
    rename_source("main.safetensors");  // its descriptor is still open in the process
    printf("worker_renameat=%ld\nmain_renameat=%ld\n", results_of[0], raw_rename("main.safetensors"));
    return 0;
  }
  if (!strcmp(which, "thread_fork")) {  // a raw fork from a thread that opened a guarded file
    if (run_thread(forks_its_own)) return 3;
    printf("child_status=%ld\n", results_of[0]);
    return 0;
  }
  if (!strcmp(which, "exec")) {
    char* args[] = {argv[0], "exec_image", (char*)dir, NULL};
    execv(argv[0], args);
    return 3;
  }
  if (!strcmp(which, "exec_image")) {
    int fd = witness();
    printf("exec_pwrite64_at_0=%ld\n", RAW(SYS_pwrite64, fd, "0000", 4, 0));
    return 0;
  }
  if (!strcmp(which, "sigsys")) {
    // The program's own SIGSYS handler, set through libc before and after the layer's start.
    struct sigaction own;
    memset(&own, 0, sizeof own);
    own.sa_sigaction = own_handler;
    own.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &own, NULL);
    int fd = witness();
    raise(SIGSYS);
    printf("own_after_raise=%d\n", (int)own_sigsys);
    printf("pwrite64_at_0=%ld\n", RAW(SYS_pwrite64, fd, "0000", 4, 0));
    struct sigaction seen;
    sigaction(SIGSYS, NULL, &seen);
    printf("sigaction_reports_own=%d\n", seen.sa_sigaction == own_handler);
    // A thread that blocks every signal, by libc and by a raw call, still has its raw calls guarded.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    printf("blocked_pwrite64_at_0=%ld\n", RAW(SYS_pwrite64, fd, "0000", 4, 0));
    uint64_t every = ~0ULL;
    RAW(SYS_rt_sigprocmask, SIG_BLOCK, &every, NULL, 8);
    printf("raw_blocked_pwrite64_at_0=%ld\n", RAW(SYS_pwrite64, fd, "0000", 4, 0));
    uint64_t now = 0;
    RAW(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &now, 8);
    printf("raw_mask_has_sigint=%d\n", (int)((now >> (SIGINT - 1)) & 1));
    return 0;
  }
  if (!strcmp(which, "many")) {  // the cost of a trapped call that is not of interest
    witness();
    long count = argc > 3 ? atol(argv[3]) : 100000;
    for (long i = 0; i < count; ++i) RAW(SYS_getppid, 0);
    return 0;
  }
  return 2;
}
