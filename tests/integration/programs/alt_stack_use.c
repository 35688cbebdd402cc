// How many bytes a signal handler on a 4 KiB alternate stack uses, per interposed call it makes on a
// guarded file, and how many of them fall below that stack (test_alt_stack.py). The stack sits in a
// larger mapping filled with a pattern; after each handler, the lowest byte changed says how deep it went.
// Usage: alt_stack_use DIR [CALL]. Prints NAME=USED,BELOW for each call (USED counts from the stack's top and
// includes the kernel's signal frame; "none" is the handler alone).
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define AREA (64 * 1024)
#define ALT (4 * 1024)
#define PATTERN 0xA5

static unsigned char* area;
static unsigned char* alt;  // the alternate stack: [alt, alt + ALT)
static int guarded_fd = -1, rw_fd = -1, plain_fd = -1;
static char file_path[4200], other_path[4200], renamed_path[4200], rw_path[4200], plain_path[4200];
static int which;

typedef void (*call_fn)(void);
static void c_none(void) {}
// The write family, seeks, sizes and syncs of a guarded descriptor.
static void c_write(void) {
  (void)!write(guarded_fd, "w", 1);
}
static void c_pwrite_end(void) {
  (void)!pwrite(guarded_fd, "p", 1, lseek(guarded_fd, 0, SEEK_END));
}
static void c_pwrite_at_0(void) {
  (void)!pwrite(guarded_fd, "0", 1, 0);
}
static void c_writev(void) {
  struct iovec v = {"v", 1};
  (void)!writev(guarded_fd, &v, 1);
}
static void c_pwritev2(void) {
  struct iovec v = {"2", 1};
  (void)!pwritev2(guarded_fd, &v, 1, -1, 0);
}
static void c_sendfile(void) {
  off_t at = 0;
  (void)!sendfile(guarded_fd, plain_fd, &at, 1);
}
static void c_copy_file_range(void) {
  off64_t at = 0;
  (void)!copy_file_range(plain_fd, &at, guarded_fd, NULL, 1, 0);
}
static void c_lseek(void) {
  lseek(guarded_fd, 0, SEEK_CUR);
}
static void c_fstat(void) {
  struct stat st;
  fstat(guarded_fd, &st);
}
static void c_fsync(void) {
  fsync(guarded_fd);
}
static void c_ftruncate(void) {
  (void)!ftruncate(guarded_fd, 0);
}
static void c_truncate(void) {
  (void)!truncate(file_path, 0);
}
static void c_fallocate(void) {
  (void)!fallocate(guarded_fd, 0, 0, 4096);
}
static void c_posix_fallocate(void) {
  (void)!posix_fallocate(guarded_fd, 0, 4096);
}
static void c_read(void) {
  char c;
  (void)!pread(rw_fd, &c, 1, 0);
  (void)!read(rw_fd, &c, 1);
}
static void c_mmap(void) {
  void* p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw_fd, 0);
  if (p != MAP_FAILED) munmap(p, 4096);
}
static void c_fcntl(void) {
  close(fcntl(guarded_fd, F_DUPFD_CLOEXEC, 0));
  fcntl(guarded_fd, F_SETFL, O_APPEND);
}
// Descriptors: duplicates and closes.
static void c_dup_close(void) {
  close(dup(guarded_fd));
}
static void c_dup2_close(void) {
  close(dup2(guarded_fd, 200));
}
static void c_close_range(void) {
  (void)!dup2(guarded_fd, 201);
  close_range(201, 201, 0);
}
// Opens: of a guarded name (tracked, then closed), of an unguarded one, read-only, and the other names.
static void c_open_close(void) {
  close(open(other_path, O_WRONLY | O_CREAT | O_APPEND, 0644));
}
static void c_open_truncate(void) {
  close(open(other_path, O_WRONLY | O_CREAT | O_TRUNC, 0644));
}
static void c_open_read(void) {
  close(open(file_path, O_RDONLY));
}
static void c_open_untracked(void) {
  close(open("/dev/null", O_WRONLY));
}
static void c_openat_close(void) {
  close(openat(AT_FDCWD, other_path, O_RDWR | O_CREAT, 0644));
}
static void c_creat_close(void) {
  close(creat(other_path, 0644));
}
static void c_fopen_fclose(void) {
  FILE* f = fopen(other_path, "a");
  if (f) {
    fputc('f', f);
    fclose(f);
  }
}
static void c_fdopen_fclose(void) {
  FILE* f = fdopen(dup(guarded_fd), "a");
  if (f) fclose(f);
}
static void c_dprintf(void) {
  dprintf(guarded_fd, "%d", 7);
}
// Names: renames and unlinks of guarded files.
static void c_rename(void) {
  rename(other_path, renamed_path);
  rename(renamed_path, other_path);
}
static void c_renameat2(void) {
  renameat2(AT_FDCWD, other_path, AT_FDCWD, renamed_path, 0);
  renameat(AT_FDCWD, renamed_path, AT_FDCWD, other_path);
}
static void c_unlink(void) {
  close(open(renamed_path, O_WRONLY | O_CREAT, 0644));
  unlink(renamed_path);
}
// libc's syscall() and the signal calls the raw-system-call layer interposes.
static void c_syscall(void) {
  (void)!syscall(SYS_pwrite64, guarded_fd, "s", 1, 0);
}
static void c_sigprocmask(void) {
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGSYS);
  sigprocmask(SIG_BLOCK, &set, &old);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}
static void c_sigaction(void) {
  struct sigaction seen;
  sigaction(SIGUSR2, NULL, &seen);
}

static const struct {
  const char* name;
  call_fn fn;
} calls[] = {{"none", c_none},
             {"write", c_write},
             {"pwrite_end", c_pwrite_end},
             {"pwrite_at_0", c_pwrite_at_0},
             {"writev", c_writev},
             {"pwritev2", c_pwritev2},
             {"sendfile", c_sendfile},
             {"copy_file_range", c_copy_file_range},
             {"lseek", c_lseek},
             {"fstat", c_fstat},
             {"fsync", c_fsync},
             {"ftruncate", c_ftruncate},
             {"truncate", c_truncate},
             {"fallocate", c_fallocate},
             {"posix_fallocate", c_posix_fallocate},
             {"read", c_read},
             {"mmap", c_mmap},
             {"fcntl", c_fcntl},
             {"dup_close", c_dup_close},
             {"dup2_close", c_dup2_close},
             {"close_range", c_close_range},
             {"open_close", c_open_close},
             {"open_truncate", c_open_truncate},
             {"open_read", c_open_read},
             {"open_untracked", c_open_untracked},
             {"openat_close", c_openat_close},
             {"creat_close", c_creat_close},
             {"fopen_fclose", c_fopen_fclose},
             {"fdopen_fclose", c_fdopen_fclose},
             {"dprintf", c_dprintf},
             {"rename", c_rename},
             {"renameat2", c_renameat2},
             {"unlink", c_unlink},
             {"syscall", c_syscall},
             {"sigprocmask", c_sigprocmask},
             {"sigaction", c_sigaction}};

static void handler(int sig) {
  (void)sig;
  calls[which].fn();
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (strlen(argv[1]) > 4000) return 2;
  snprintf(file_path, sizeof file_path, "%s/stack.log", argv[1]);
  snprintf(other_path, sizeof other_path, "%s/other.log", argv[1]);
  snprintf(renamed_path, sizeof renamed_path, "%s/renamed.log", argv[1]);
  snprintf(rw_path, sizeof rw_path, "%s/rw.log", argv[1]);
  snprintf(plain_path, sizeof plain_path, "%s/plain.txt", argv[1]);
  guarded_fd = open(file_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  rw_fd = open(rw_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (guarded_fd < 0 || rw_fd < 0 || write(rw_fd, "abcd", 4) != 4) return 3;
  plain_fd = open(plain_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (plain_fd < 0 || write(plain_fd, "plain", 5) != 5) return 3;
  area = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) return 3;
  alt = area + AREA - ALT;
  stack_t ss = {.ss_sp = alt, .ss_size = ALT, .ss_flags = 0};
  if (sigaltstack(&ss, NULL) != 0) return 3;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = handler;
  action.sa_flags = SA_ONSTACK;
  sigaction(SIGUSR1, &action, NULL);
  for (which = 0; which < (int)(sizeof calls / sizeof calls[0]); ++which) {
    if (argc > 2 && strcmp(argv[2], calls[which].name) != 0) continue;
    for (int round = 0; round < 2; ++round) {  // the second: what the first one's lazy set-up left aside
      memset(area, PATTERN, AREA);
      raise(SIGUSR1);
      size_t lowest = AREA;
      for (size_t i = 0; i < AREA; ++i) {
        if (area[i] != PATTERN) {
          lowest = i;
          break;
        }
      }
      const size_t used = AREA - lowest;
      if (round == 1) printf("%s=%zu,%zu\n", calls[which].name, used, used > ALT ? used - ALT : 0);
      fflush(stdout);
    }
  }
  return 0;
}
