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
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define AREA (64 * 1024)
#define ALT (4 * 1024)
#define PATTERN 0xA5

static unsigned char* area;
static unsigned char* alt;  // the alternate stack: [alt, alt + ALT)
static int guarded_fd = -1;
static char file_path[4200], other_path[4200], renamed_path[4200];
static int which;

typedef void (*call_fn)(void);
static void c_none(void) {}
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
static void c_dup_close(void) {
  close(dup(guarded_fd));
}
static void c_open_close(void) {
  close(open(other_path, O_WRONLY | O_CREAT | O_APPEND, 0644));
}
static void c_open_untracked(void) {
  close(open("/dev/null", O_WRONLY));
}
static void c_rename(void) {
  rename(other_path, renamed_path);
  rename(renamed_path, other_path);
}

static const struct {
  const char* name;
  call_fn fn;
} calls[] = {{"none", c_none},
             {"write", c_write},
             {"pwrite_end", c_pwrite_end},
             {"pwrite_at_0", c_pwrite_at_0},
             {"writev", c_writev},
             {"lseek", c_lseek},
             {"fstat", c_fstat},
             {"fsync", c_fsync},
             {"ftruncate", c_ftruncate},
             {"dup_close", c_dup_close},
             {"open_close", c_open_close},
             {"open_untracked", c_open_untracked},
             {"rename", c_rename}};

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
  guarded_fd = open(file_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (guarded_fd < 0) return 3;
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
