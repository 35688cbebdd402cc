// The stack every interposed call's common path needs (issue 24, item 6): each operation runs on a thread
// whose stack is painted below the caller's frame, and the deepest byte it touched is measured. Run with
// and without the library, the difference is what the library adds.
// The program is linked with -z now, so that no lazy binding runs in the measured calls.
// Usage: stack_budget DIR measure          prints "NAME=BYTES" per operation
//        stack_budget DIR run STACK_BYTES  runs them all on a thread of that stack (guard page below)
//        stack_budget DIR first STACK_BYTES  the same with no first pass on the main thread: the thread
//                                            makes the process's first calls (the library's first-use work)
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[2048];
static int g_dirfd = -1;
static int g_fd = -1;     // the guarded file, open for writing
static int g_plain = -1;  // an unguarded file, open for writing
static int g_dup = -1;
static FILE* g_stream = NULL;
static char g_buffer[64];
static int g_failures = 0;

static void check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "stack_budget: %s failed\n", what);
    ++g_failures;
  }
}

static char* in_dir(const char* name) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  return path;
}

#define OP(name) static void __attribute__((noinline)) op_##name(void)
OP(open_unguarded) {
  g_plain = open("t.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  check(g_plain >= 0, "open t.bin");
}
OP(write_unguarded) {
  check(write(g_plain, g_buffer, 64) == 64, "write t.bin");
}
OP(close_unguarded) {
  check(close(g_plain) == 0, "close t.bin");
}
OP(open_guarded) {
  g_fd = open("g.safetensors", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  check(g_fd >= 0, "open guarded");
}
OP(write_guarded) {
  check(write(g_fd, g_buffer, 64) == 64, "write guarded");
}
OP(pwrite_guarded) {
  check(pwrite(g_fd, g_buffer, 64, 64) == 64, "pwrite guarded at its end");
}
OP(lseek_end) {
  check(lseek(g_fd, 0, SEEK_END) == 128, "lseek END");
}
OP(lseek_cur) {
  check(lseek(g_fd, 0, SEEK_CUR) == 128, "lseek CUR");
}
OP(fstat_guarded) {
  struct stat st;
  check(fstat(g_fd, &st) == 0, "fstat");
}
OP(fsync_guarded) {
  check(fsync(g_fd) == 0, "fsync");
}
OP(ftruncate_guarded) {
  check(ftruncate(g_fd, 128) == 0, "ftruncate at its size");
}
OP(dup_guarded) {
  g_dup = dup(g_fd);
  check(g_dup >= 0, "dup");
}
OP(close_dup) {
  check(close(g_dup) == 0, "close dup");
}
OP(close_guarded) {
  check(close(g_fd) == 0, "close guarded");
}
OP(open_absolute_guarded) {
  g_fd = open(in_dir("a.safetensors"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  check(g_fd >= 0, "open absolute");
}
OP(close_absolute) {
  check(close(g_fd) == 0, "close absolute");
}
OP(openat_guarded) {
  g_fd = openat(g_dirfd, "b.safetensors", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  check(g_fd >= 0, "openat");
}
OP(close_openat) {
  check(close(g_fd) == 0, "close openat");
}
OP(openat_unguarded) {
  g_plain = openat(g_dirfd, "u.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  check(g_plain >= 0, "openat unguarded");
}
OP(close_openat_unguarded) {
  check(close(g_plain) == 0, "close openat unguarded");
}
OP(creat_guarded) {
  g_fd = creat("c.safetensors", 0644);
  check(g_fd >= 0, "creat");
}
OP(close_creat) {
  check(close(g_fd) == 0, "close creat");
}
OP(reopen_append) {
  g_fd = open("g.safetensors", O_WRONLY | O_APPEND);
  check(g_fd >= 0, "reopen O_APPEND");
}
OP(write_appended) {
  check(write(g_fd, g_buffer, 64) == 64, "append");
}
OP(close_reopened) {
  check(close(g_fd) == 0, "close reopened");
}
OP(open_read_guarded) {
  g_fd = open("g.safetensors", O_RDONLY);
  check(g_fd >= 0, "open read-only");
}
OP(read_guarded) {
  check(read(g_fd, g_buffer, 64) == 64, "read");
}
OP(close_read) {
  check(close(g_fd) == 0, "close read-only");
}
OP(fopen_guarded) {
  g_stream = fopen("s.safetensors", "wb");
  check(g_stream != NULL, "fopen guarded");
}
OP(fwrite_guarded) {
  check(fwrite(g_buffer, 1, 64, g_stream) == 64, "fwrite guarded");
}
OP(fflush_guarded) {
  check(fflush(g_stream) == 0, "fflush guarded");
}
OP(fclose_guarded) {
  check(fclose(g_stream) == 0, "fclose guarded");
}
OP(fopen_unguarded) {
  g_stream = fopen("s.bin", "wb");
  check(g_stream != NULL, "fopen unguarded");
}
OP(fclose_unguarded) {
  check(fclose(g_stream) == 0, "fclose unguarded");
}

struct op {
  const char* name;
  void (*run)(void);
};
#define ENTRY(name) \
  { #name, op_##name }
static const struct op g_ops[] = {
    ENTRY(open_unguarded),
    ENTRY(write_unguarded),
    ENTRY(close_unguarded),
    ENTRY(open_guarded),
    ENTRY(write_guarded),
    ENTRY(pwrite_guarded),
    ENTRY(lseek_end),
    ENTRY(lseek_cur),
    ENTRY(fstat_guarded),
    ENTRY(fsync_guarded),
    ENTRY(ftruncate_guarded),
    ENTRY(dup_guarded),
    ENTRY(close_dup),
    ENTRY(close_guarded),
    ENTRY(open_absolute_guarded),
    ENTRY(close_absolute),
    ENTRY(openat_guarded),
    ENTRY(close_openat),
    ENTRY(openat_unguarded),
    ENTRY(close_openat_unguarded),
    ENTRY(creat_guarded),
    ENTRY(close_creat),
    ENTRY(reopen_append),
    ENTRY(write_appended),
    ENTRY(close_reopened),
    ENTRY(open_read_guarded),
    ENTRY(read_guarded),
    ENTRY(close_read),
    ENTRY(fopen_guarded),
    ENTRY(fwrite_guarded),
    ENTRY(fflush_guarded),
    ENTRY(fclose_guarded),
    ENTRY(fopen_unguarded),
    ENTRY(fclose_unguarded),
};
#define OP_COUNT (sizeof g_ops / sizeof g_ops[0])

static char* g_stack = NULL;  // lowest usable byte
static size_t g_used[OP_COUNT];
static int g_measure = 0;

// Paints from the stack's bottom up to well below this frame, runs the operation, and returns how far
// below the painted top it wrote.
static size_t __attribute__((noinline)) measure(void (*run)(void)) {
  char here;
  char* top = (char*)((uintptr_t)&here - 256);
  memset(g_stack, 0xA5, (size_t)(top - g_stack));
  run();
  char* p = g_stack;
  while (p < top && (unsigned char)*p == 0xA5) ++p;
  return (size_t)(top - p);
}

static void* thread_main(void* arg) {
  (void)arg;
  for (size_t i = 0; i < OP_COUNT; ++i) {
    if (g_measure) {
      g_used[i] = measure(g_ops[i].run);
    } else {
      g_ops[i].run();
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
  if (chdir(g_dir) != 0) return 3;
  g_dirfd = open(g_dir, O_RDONLY | O_DIRECTORY);
  if (g_dirfd < 0) return 3;
  memset(g_buffer, 'x', sizeof g_buffer);
  g_measure = !strcmp(argv[2], "measure");
  const int warm = strcmp(argv[2], "first") != 0;
  size_t size = g_measure ? (size_t)1 << 20 : strtoul(argv[3], NULL, 0);
  long page = sysconf(_SC_PAGESIZE);
  char* region = mmap(NULL, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED || mprotect(region, page, PROT_NONE) != 0) return 4;
  g_stack = region + page;
  // A first pass on the main thread: what is measured is the common path, not the first call of each
  // function (the loader's lazy binding, our first-call resolution of libc's functions).
  for (size_t i = 0; warm && i < OP_COUNT; ++i) g_ops[i].run();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (pthread_attr_setstack(&attr, g_stack, size) != 0) return 5;
  pthread_t thread;
  if (pthread_create(&thread, &attr, thread_main, NULL) != 0) return 6;
  pthread_join(thread, NULL);
  for (size_t i = 0; g_measure && i < OP_COUNT; ++i) printf("%s=%zu\n", g_ops[i].name, g_used[i]);
  printf("failures=%d\n", g_failures);
  return 0;
}
