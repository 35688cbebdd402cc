// The exerciser's driver: carries out one operation sequence exactly, in the current directory.
//
// stdin: one operation per line, `NAME ARG...` (tests/exerciser/operations.py writes them); a NAME ending
// in `!` makes the same call as a raw syscall() instruction. Descriptors are named by slot (0..7), files
// by name. stdout: one result line per operation, `RET ERRNO [DETAIL]` (ERRNO 0 on success; DETAIL is a
// read's checksum or a stat's size). Before each operation `@INDEX` goes to stderr, so that the library's
// `appendguard:` lines can be told apart by the call that caused them.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <setjmp.h>
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
#include <sys/wait.h>
#include <unistd.h>

enum { kSlots = 8, kMaxLength = 1 << 16 };

static int slots[kSlots];
static unsigned char buffer[kMaxLength];
static sigjmp_buf on_fault;

static void fault(int signal_number) {
  siglongjmp(on_fault, signal_number);
}

// The bytes the index-th operation writes: distinct per operation, so that misplaced bytes show.
static void fill(size_t length, int index) {
  for (size_t i = 0; i < length; i++) buffer[i] = (unsigned char)('A' + (index * 7 + (int)(i / 61)) % 26);
}

static unsigned checksum(const unsigned char* data, long length) {
  unsigned h = 2166136261u;
  for (long i = 0; i < length; i++) h = (h ^ data[i]) * 16777619u;
  return h;
}

static int slot(const char* text) {
  int s = atoi(text);
  return s >= 0 && s < kSlots ? slots[s] : -1;
}

static int open_flags(const char* mode) {
  static const struct {
    const char* mode;
    int flags;
  } kModes[] = {
      {"r", O_RDONLY},
      {"r+", O_RDWR},
      {"w", O_WRONLY | O_CREAT | O_TRUNC},
      {"w+", O_RDWR | O_CREAT | O_TRUNC},
      {"a", O_WRONLY | O_CREAT | O_APPEND},
      {"a+", O_RDWR | O_CREAT | O_APPEND},
      {"x", O_WRONLY | O_CREAT | O_EXCL},
      {"x+", O_RDWR | O_CREAT | O_EXCL},
      {"wo", O_WRONLY},               // an existing file, its bytes kept
      {"trunc", O_RDWR | O_TRUNC},    // an existing file emptied
      {"wtrunc", O_WRONLY | O_TRUNC}  // `sort -o F F`'s open
  };
  for (size_t i = 0; i < sizeof kModes / sizeof kModes[0]; i++)
    if (strcmp(kModes[i].mode, mode) == 0) return kModes[i].flags;
  return -1;
}

static int whence_of(const char* text) {
  if (strcmp(text, "set") == 0) return SEEK_SET;
  if (strcmp(text, "cur") == 0) return SEEK_CUR;
  if (strcmp(text, "end") == 0) return SEEK_END;
  if (strcmp(text, "data") == 0) return SEEK_DATA;
  if (strcmp(text, "hole") == 0) return SEEK_HOLE;
  return -1;
}

static int fallocate_mode(const char* text) {
  if (strcmp(text, "keep") == 0) return FALLOC_FL_KEEP_SIZE;
  if (strcmp(text, "punch") == 0) return FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
  if (strcmp(text, "zero") == 0) return FALLOC_FL_ZERO_RANGE;
  return 0;
}

// Reads `length` bytes at `offset` through a MAP_SHARED mapping (write: stores them); a SIGBUS is a result.
static long mapped(int fd, long length, long offset, int write, int index, char* detail) {
  long page = sysconf(_SC_PAGESIZE);
  long base = offset / page * page;
  long span = offset - base + length;
  void* map = mmap(NULL, (size_t)span, write ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, base);
  if (map == MAP_FAILED) return -1;
  volatile unsigned char* at = (unsigned char*)map + (offset - base);
  int signal_number = sigsetjmp(on_fault, 1);
  if (signal_number != 0) {
    munmap(map, (size_t)span);
    sprintf(detail, "signal=%d", signal_number);
    errno = 0;
    return -2;
  }
  if (write) {
    fill((size_t)length, index);
    for (long i = 0; i < length; i++) at[i] = buffer[i];
    msync(map, (size_t)span, MS_SYNC);
  } else {
    for (long i = 0; i < length; i++) buffer[i] = at[i];
    sprintf(detail, "sum=%08x", checksum(buffer, length));
  }
  munmap(map, (size_t)span);
  return 0;
}

static long perform(char** a, int n, int index, char* detail) {
  const char* op = a[0];
  size_t len = strlen(op);
  int raw = len > 0 && op[len - 1] == '!';
  char name[32];
  snprintf(name, sizeof name, "%.*s", (int)(raw ? len - 1 : len), op);
#define ARG(i) (n > (i) ? a[i] : "0")
#define NUM(i) atol(ARG(i))
  if (strcmp(name, "open") == 0) {
    int s = atoi(ARG(1));
    int flags = open_flags(ARG(3)) | O_CLOEXEC;
    if (s < 0 || s >= kSlots || flags == -1) return errno = EINVAL, -1;
    int fd = raw ? (int)syscall(SYS_openat, AT_FDCWD, ARG(2), flags, 0644) : open(ARG(2), flags, 0644);
    if (fd >= 0) slots[s] = fd;
    return fd >= 0 ? 0 : -1;
  }
  if (strcmp(name, "close") == 0) {
    int s = atoi(ARG(1));
    int fd = slot(ARG(1));
    long r = raw ? syscall(SYS_close, fd) : close(fd);
    if (fd >= 0) slots[s] = -1;
    return r;
  }
  if (strcmp(name, "dup") == 0) {
    int to = atoi(ARG(2));
    int fd = dup(slot(ARG(1)));
    if (fd >= 0 && to >= 0 && to < kSlots) {
      if (slots[to] >= 0) close(slots[to]);
      slots[to] = fd;
    }
    return fd >= 0 ? 0 : -1;
  }
  if (strcmp(name, "write") == 0 || strcmp(name, "writev") == 0 || strcmp(name, "pwrite") == 0 ||
      strcmp(name, "pwritev2") == 0) {
    int fd = slot(ARG(1));
    size_t length = (size_t)NUM(2);
    if (length > kMaxLength) length = kMaxLength;
    fill(length, index);
    struct iovec iov[2] = {{buffer, length / 2}, {buffer + length / 2, length - length / 2}};
    if (name[0] == 'p' && name[6] == 'v')
      return raw ? syscall(SYS_pwritev2, fd, iov, 2, NUM(3), 0, 0) : pwritev2(fd, iov, 2, NUM(3), 0);
    if (name[0] == 'p')
      return raw ? syscall(SYS_pwrite64, fd, buffer, length, NUM(3)) : pwrite(fd, buffer, length, NUM(3));
    if (name[5] == 'v') return raw ? syscall(SYS_writev, fd, iov, 2) : writev(fd, iov, 2);
    return raw ? syscall(SYS_write, fd, buffer, length) : write(fd, buffer, length);
  }
  if (strcmp(name, "read") == 0 || strcmp(name, "pread") == 0) {
    int fd = slot(ARG(1));
    size_t length = (size_t)NUM(2);
    if (length > kMaxLength) length = kMaxLength;
    long r = name[0] == 'p' ? (raw ? syscall(SYS_pread64, fd, buffer, length, NUM(3))
                                   : pread(fd, buffer, length, NUM(3)))
                            : (raw ? syscall(SYS_read, fd, buffer, length) : read(fd, buffer, length));
    if (r >= 0) sprintf(detail, "sum=%08x", checksum(buffer, r));
    return r;
  }
  if (strcmp(name, "mmapread") == 0 || strcmp(name, "mmapwrite") == 0)
    return mapped(slot(ARG(1)), NUM(2) > 0 ? NUM(2) : 1, NUM(3), name[4] == 'w', index, detail);
  if (strcmp(name, "lseek") == 0) {
    int whence = whence_of(ARG(3));
    return raw ? syscall(SYS_lseek, slot(ARG(1)), NUM(2), whence) : lseek(slot(ARG(1)), NUM(2), whence);
  }
  if (strcmp(name, "ftruncate") == 0)
    return raw ? syscall(SYS_ftruncate, slot(ARG(1)), NUM(2)) : ftruncate(slot(ARG(1)), NUM(2));
  if (strcmp(name, "truncate") == 0)
    return raw ? syscall(SYS_truncate, ARG(1), NUM(2)) : truncate(ARG(1), NUM(2));
  if (strcmp(name, "fallocate") == 0) {
    int mode = fallocate_mode(ARG(2));
    return raw ? syscall(SYS_fallocate, slot(ARG(1)), mode, NUM(3), NUM(4))
               : fallocate(slot(ARG(1)), mode, NUM(3), NUM(4));
  }
  if (strcmp(name, "posix_fallocate") == 0) {
    int error = posix_fallocate(slot(ARG(1)), NUM(2), NUM(3));
    errno = error;
    return error ? -1 : 0;
  }
  if (strcmp(name, "copy_file_range") == 0) {  // IN OFF_IN OUT OFF_OUT LENGTH; an offset < 0: the position
    loff_t in_offset = NUM(2), out_offset = NUM(4);
    loff_t* in_at = in_offset < 0 ? NULL : &in_offset;
    loff_t* out_at = out_offset < 0 ? NULL : &out_offset;
    return raw ? syscall(SYS_copy_file_range, slot(ARG(1)), in_at, slot(ARG(3)), out_at, (size_t)NUM(5), 0)
               : copy_file_range(slot(ARG(1)), in_at, slot(ARG(3)), out_at, (size_t)NUM(5), 0);
  }
  if (strcmp(name, "sendfile") == 0) {  // OUT IN OFF_IN LENGTH
    off_t offset = NUM(3);
    return sendfile(slot(ARG(1)), slot(ARG(2)), offset < 0 ? NULL : &offset, (size_t)NUM(4));
  }
  if (strcmp(name, "fsync") == 0) return raw ? syscall(SYS_fsync, slot(ARG(1))) : fsync(slot(ARG(1)));
  if (strcmp(name, "fchmod") == 0) return fchmod(slot(ARG(1)), (mode_t)strtol(ARG(2), NULL, 8));
  if (strcmp(name, "futimens") == 0) {
    struct timespec times[2] = {{NUM(2), 0}, {NUM(2), 0}};
    return futimens(slot(ARG(1)), times);
  }
  if (strcmp(name, "fstat") == 0 || strcmp(name, "stat") == 0) {
    struct stat st;
    int r = name[0] == 'f' ? fstat(slot(ARG(1)), &st) : stat(ARG(1), &st);
    if (r == 0) sprintf(detail, "size=%lld", (long long)st.st_size);
    return r;
  }
  if (strcmp(name, "rename") == 0)
    return raw ? syscall(SYS_renameat2, AT_FDCWD, ARG(1), AT_FDCWD, ARG(2), 0) : rename(ARG(1), ARG(2));
  if (strcmp(name, "unlink") == 0) return raw ? syscall(SYS_unlinkat, AT_FDCWD, ARG(1), 0) : unlink(ARG(1));
  if (strcmp(name, "fork") == 0) {  // a child writes LENGTH bytes to the inherited slot and exits
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
      size_t length = (size_t)NUM(2);
      if (length > kMaxLength) length = kMaxLength;
      fill(length, index);
      _exit(write(slot(ARG(1)), buffer, length) == (ssize_t)length ? 0 : 1);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) < 0) return -1;
    sprintf(detail, "child=%d", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
  }
#undef ARG
#undef NUM
  return errno = ENOSYS, -1;
}

int main(void) {
  for (int i = 0; i < kSlots; i++) slots[i] = -1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fault;
  sigaction(SIGBUS, &sa, NULL);
  sigaction(SIGSEGV, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  char line[512];
  for (int index = 0; fgets(line, sizeof line, stdin); index++) {
    char* args[8];
    int n = 0;
    for (char* t = strtok(line, " \t\n"); t && n < 8; t = strtok(NULL, " \t\n")) args[n++] = t;
    if (n == 0) {
      index--;
      continue;
    }
    dprintf(2, "@%d\n", index);
    char detail[64] = "";
    errno = 0;
    long r = perform(args, n, index, detail);
    int error = r < 0 ? errno : 0;
    printf("%ld %d%s%s\n", r < 0 ? -1L : r, error, detail[0] ? " " : "", detail);
    fflush(stdout);
  }
  return 0;
}
