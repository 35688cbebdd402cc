// A preload library placed after libappendguard.so in LD_PRELOAD, so that appendguard's "real" fcntl and
// fstat, and the readlink and readdir it calls, are these: it counts the calls a process makes to look at
// its descriptors, and prints the count at exit in the program named by COUNT_CALLS_IN (test_descriptors:
// the work of adopting inherited descriptors must follow the guarded ones, not every one inherited).
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static long g_calls;

__attribute__((destructor)) static void say_count(void) {
  const char* in = getenv("COUNT_CALLS_IN");
  if (!in || strcmp(in, program_invocation_short_name) != 0) return;
  char line[96];
  int n = snprintf(line, sizeof line, "count_calls: %s=%ld\n", program_invocation_short_name, g_calls);
  if (n > 0) (void)!syscall(SYS_write, 2, line, (size_t)n);
}

#define NEXT(type, name) ((type)dlsym(RTLD_NEXT, name))

int fcntl(int fd, int command, ...) {
  va_list args;
  va_start(args, command);
  long argument = va_arg(args, long);
  va_end(args);
  ++g_calls;
  return NEXT(int (*)(int, int, long), "fcntl")(fd, command, argument);
}

int fcntl64(int fd, int command, ...) {
  va_list args;
  va_start(args, command);
  long argument = va_arg(args, long);
  va_end(args);
  ++g_calls;
  return NEXT(int (*)(int, int, long), "fcntl64")(fd, command, argument);
}

int fstat64(int fd, struct stat64* st) {
  ++g_calls;
  return NEXT(int (*)(int, struct stat64*), "fstat64")(fd, st);
}

int fstat(int fd, struct stat* st) {
  ++g_calls;
  return NEXT(int (*)(int, struct stat*), "fstat")(fd, st);
}

ssize_t readlink(const char* path, char* out, size_t size) {
  ++g_calls;
  return NEXT(ssize_t(*)(const char*, char*, size_t), "readlink")(path, out, size);
}

struct dirent* readdir(DIR* dir) {
  ++g_calls;
  return NEXT(struct dirent * (*)(DIR*), "readdir")(dir);
}

struct dirent64* readdir64(DIR* dir) {
  ++g_calls;
  return NEXT(struct dirent64 * (*)(DIR*), "readdir64")(dir);
}
