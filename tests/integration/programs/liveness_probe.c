// Calls every libc name of src/shim/interposed.def once on a guarded file (test_liveness.py checks that
// the trace names each one). Built plain, with _FILE_OFFSET_BITS=64 and fortified: a name the build's
// headers produce is called as the program would call it (write, which the 64-bit build turns into
// write, pwrite into pwrite64, the fortified build's open with runtime flags into __open_2); the names the
// headers do not produce are called by name, through dlsym, so that every build reaches all of them.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#if defined(_FILE_OFFSET_BITS) && _FILE_OFFSET_BITS == 64
#define WIDE 1
#else
#define WIDE 0
#endif
#if defined(__USE_FORTIFY_LEVEL) && __USE_FORTIFY_LEVEL > 0
#define FORTIFIED 1
#else
#define FORTIFIED 0
#endif

// A name called through dlsym(RTLD_DEFAULT): the preloaded library's if it exports it, else libc's.
#define BY_NAME(type, name) ((type)by_name(#name))
static void* by_name(const char* name) {
  void* fn = dlsym(RTLD_DEFAULT, name);
  if (!fn) {
    fprintf(stderr, "liveness_probe: no %s\n", name);
    exit(3);
  }
  return fn;
}

typedef int (*open_fn)(const char*, int, ...);
typedef int (*open_2_fn)(const char*, int);
typedef int (*openat_fn)(int, const char*, int, ...);
typedef int (*openat_2_fn)(int, const char*, int);
typedef int (*creat_fn)(const char*, mode_t);
typedef ssize_t (*pwrite_fn)(int, const void*, size_t, long);
typedef ssize_t (*pwritev_fn)(int, const struct iovec*, int, long);
typedef ssize_t (*pwritev2_fn)(int, const struct iovec*, int, long, int);
typedef ssize_t (*sendfile_fn)(int, int, long*, size_t);
typedef long (*lseek_fn)(int, long, int);
typedef int (*fcntl_fn)(int, int, ...);
typedef int (*fstat_fn)(int, struct stat*);
typedef int (*fxstat_fn)(int, int, struct stat*);
typedef int (*ftruncate_fn)(int, long);
typedef int (*truncate_fn)(const char*, long);
typedef int (*fallocate_fn)(int, int, long, long);
typedef int (*posix_fallocate_fn)(int, long, long);
typedef ssize_t (*pread_fn)(int, void*, size_t, long);
typedef ssize_t (*preadv_fn)(int, const struct iovec*, int, long);
typedef ssize_t (*preadv2_fn)(int, const struct iovec*, int, long, int);
typedef void* (*mmap_fn)(void*, size_t, int, int, int, long);
typedef FILE* (*fopen_fn)(const char*, const char*);
typedef FILE* (*freopen_fn)(const char*, const char*, FILE*);
typedef int (*dprintf_fn)(int, const char*, ...);
typedef int (*vdprintf_fn)(int, const char*, va_list);
typedef int (*dprintf_chk_fn)(int, int, const char*, ...);
typedef int (*vdprintf_chk_fn)(int, int, const char*, va_list);

static volatile int runtime_flags = O_WRONLY;  // not a constant: the fortified open calls __open_2
static char path[4096];
static char buf[64];
static struct iovec iov = {buf, 2};

static off_t end_of(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? st.st_size : 0;
}

static void opens(void) {
  close(creat(path, 0644));
  close(open(path, O_WRONLY | O_CREAT, 0644));
  close(open(path, runtime_flags));
  close(openat(AT_FDCWD, path, O_WRONLY | O_CREAT, 0644));
  close(openat(AT_FDCWD, path, runtime_flags));
#if WIDE
  close(BY_NAME(creat_fn, creat)(path, 0644));
  close(BY_NAME(open_fn, open)(path, O_WRONLY));
  close(BY_NAME(openat_fn, openat)(AT_FDCWD, path, O_WRONLY));
#else
  close(BY_NAME(creat_fn, creat64)(path, 0644));
  close(BY_NAME(open_fn, open64)(path, O_WRONLY));
  close(BY_NAME(openat_fn, openat64)(AT_FDCWD, path, O_WRONLY));
#endif
#if !FORTIFIED
  close(BY_NAME(open_2_fn, __open_2)(path, O_WRONLY));
  close(BY_NAME(openat_2_fn, __openat_2)(AT_FDCWD, path, O_WRONLY));
#endif
  close(BY_NAME(open_2_fn, __open64_2)(path, O_WRONLY));
  close(BY_NAME(openat_2_fn, __openat64_2)(AT_FDCWD, path, O_WRONLY));
}

static void writes(int fd, int source) {
  int pipe_fds[2];
  if (write(fd, "ab", 2) < 0) perror("write");
  if (pwrite(fd, "ab", 2, end_of(fd)) < 0) perror("pwrite");
  if (writev(fd, &iov, 1) < 0) perror("writev");
  if (pwritev(fd, &iov, 1, end_of(fd)) < 0) perror("pwritev");
  if (pwritev2(fd, &iov, 1, -1, 0) < 0) perror("pwritev2");
  off_t from = 0;
  if (sendfile(fd, source, &from, 2) < 0) perror("sendfile");
  from = 0;
  loff_t from64 = 0;
  if (copy_file_range(source, &from64, fd, NULL, 2, 0) < 0) perror("copy_file_range");
  if (pipe(pipe_fds) == 0) {
    if (write(pipe_fds[1], "ab", 2) != 2) perror("pipe write");
    if (splice(pipe_fds[0], NULL, fd, NULL, 2, 0) < 0) perror("splice");
    close(pipe_fds[0]);
    close(pipe_fds[1]);
  }
  long at = (long)end_of(fd);
#if WIDE
  BY_NAME(pwrite_fn, pwrite)(fd, "ab", 2, at);
  BY_NAME(pwritev_fn, pwritev)(fd, &iov, 1, at + 2);
  BY_NAME(pwritev2_fn, pwritev2)(fd, &iov, 1, -1, 0);
  BY_NAME(sendfile_fn, sendfile)(fd, source, &from, 2);
#else
  BY_NAME(pwrite_fn, pwrite64)(fd, "ab", 2, at);
  BY_NAME(pwritev_fn, pwritev64)(fd, &iov, 1, at + 2);
  BY_NAME(pwritev2_fn, pwritev64v2)(fd, &iov, 1, -1, 0);
  BY_NAME(sendfile_fn, sendfile64)(fd, source, &from, 2);
#endif
}

static void positions_and_sizes(int fd) {
  struct stat st;
  lseek(fd, 0, SEEK_END);
  fsync(fd);
  fdatasync(fd);
  fstat(fd, &st);
  BY_NAME(fxstat_fn, __fxstat)(1, fd, &st);
  BY_NAME(fxstat_fn, __fxstat64)(1, fd, &st);
  long size = (long)st.st_size;
  if (ftruncate(fd, size) != 0) perror("ftruncate");
  if (truncate(path, size) != 0) perror("truncate");
  fallocate(fd, 0, 0, 1);
  posix_fallocate(fd, 0, 1);
#if WIDE
  BY_NAME(lseek_fn, lseek)(fd, 0, SEEK_END);
  BY_NAME(fstat_fn, fstat)(fd, &st);
  BY_NAME(ftruncate_fn, ftruncate)(fd, size);
  BY_NAME(truncate_fn, truncate)(path, size);
  BY_NAME(fallocate_fn, fallocate)(fd, 0, 0, 1);
  BY_NAME(posix_fallocate_fn, posix_fallocate)(fd, 0, 1);
#else
  BY_NAME(lseek_fn, lseek64)(fd, 0, SEEK_END);
  BY_NAME(fstat_fn, fstat64)(fd, &st);
  BY_NAME(ftruncate_fn, ftruncate64)(fd, size);
  BY_NAME(truncate_fn, truncate64)(path, size);
  BY_NAME(fallocate_fn, fallocate64)(fd, 0, 0, 1);
  BY_NAME(posix_fallocate_fn, posix_fallocate64)(fd, 0, 1);
#endif
}

// The descriptor was made write-only: each read is refused by the kernel and reported.
static void reads_and_maps(int fd) {
  if (read(fd, buf, 2) >= 0) fputs("read succeeded\n", stderr);
  if (pread(fd, buf, 2, 0) >= 0) fputs("pread succeeded\n", stderr);
  if (readv(fd, &iov, 1) >= 0) fputs("readv succeeded\n", stderr);
  if (preadv(fd, &iov, 1, 0) >= 0) fputs("preadv succeeded\n", stderr);
  if (preadv2(fd, &iov, 1, 0, 0) >= 0) fputs("preadv2 succeeded\n", stderr);
  void* map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map != MAP_FAILED) munmap(map, 4096);
#if WIDE
  BY_NAME(pread_fn, pread)(fd, buf, 2, 0);
  BY_NAME(preadv_fn, preadv)(fd, &iov, 1, 0);
  BY_NAME(preadv2_fn, preadv2)(fd, &iov, 1, 0, 0);
  map = BY_NAME(mmap_fn, mmap)(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
#else
  BY_NAME(pread_fn, pread64)(fd, buf, 2, 0);
  BY_NAME(preadv_fn, preadv64)(fd, &iov, 1, 0);
  BY_NAME(preadv2_fn, preadv64v2)(fd, &iov, 1, 0, 0);
  map = BY_NAME(mmap_fn, mmap64)(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
#endif
  if (map != MAP_FAILED) munmap(map, 4096);
}

static void descriptors(int fd) {
  close(dup(fd));
  close(dup2(fd, 150));
  close(dup3(fd, 151, O_CLOEXEC));
  close(fcntl(fd, F_DUPFD, 152));
#if WIDE
  close(BY_NAME(fcntl_fn, fcntl)(fd, F_DUPFD, 153));
#else
  close(BY_NAME(fcntl_fn, fcntl64)(fd, F_DUPFD, 153));
#endif
  dup2(fd, 160);
  close_range(160, 160, 0);
}

static void send_descriptor(int socket, int fd) {
  char data = 'x';
  struct iovec part = {&data, 1};
  char control[CMSG_SPACE(sizeof(int))];
  struct msghdr message = {
      .msg_iov = &part, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
  struct cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(header), &fd, sizeof(int));
  if (sendmsg(socket, &message, 0) < 0) perror("sendmsg");
}

static void receives(int fd) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return;
  for (int i = 0; i < 2; ++i) {
    char data;
    struct iovec part = {&data, 1};
    char control[CMSG_SPACE(sizeof(int))];
    struct mmsghdr messages = {
        .msg_hdr = {
            .msg_iov = &part, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control}};
    send_descriptor(pair[0], fd);
    int got = i == 0 ? (int)recvmsg(pair[1], &messages.msg_hdr, 0) : recvmmsg(pair[1], &messages, 1, 0, NULL);
    if (got >= 0 && messages.msg_hdr.msg_controllen > 0) {
      int received;
      memcpy(&received, CMSG_DATA(CMSG_FIRSTHDR(&messages.msg_hdr)), sizeof(int));
      close(received);
    }
  }
  close(pair[0]);
  close(pair[1]);
}

// Every exec fails (there is no such program): the hooks carry the guarded descriptor all the same.
static void execs(void) {
  const char* none = "/nonexistent/appendguard-liveness";
  char* argv[] = {(char*)none, NULL};
  pid_t pid;
  execve(none, argv, environ);
  execv(none, argv);
  execvp(none, argv);
  execvpe(none, argv, environ);
  execl(none, none, (char*)NULL);
  execle(none, none, (char*)NULL, environ);
  execlp(none, none, (char*)NULL);
  int directory = open("/", O_RDONLY | O_DIRECTORY);
  execveat(directory, "nonexistent/appendguard-liveness", argv, environ, 0);
  fexecve(directory, argv, environ);
  close(directory);
  posix_spawn(&pid, none, NULL, NULL, argv, environ);
  posix_spawnp(&pid, none, NULL, NULL, argv, environ);
  // glibc's own spawns: they run a shell, which exits at once.
  if (system("exit 0") != 0) fprintf(stderr, "system failed\n");
  FILE* child = popen("exit 0", "r");
  if (child) pclose(child);
  // A vfork child that exits without exec (the hook counts it before the real call).
  pid = vfork();
  if (pid == 0) _exit(0);
  if (pid > 0) waitpid(pid, NULL, 0);
}

// The rename family on guarded names (traced, then performed): the file ends where it started.
static void renames(void) {
  char moved[sizeof path + 32];
  snprintf(moved, sizeof moved, "%s.moved.safetensors", path);
  rename(path, moved);
  renameat(AT_FDCWD, moved, AT_FDCWD, path);
  renameat2(AT_FDCWD, path, AT_FDCWD, moved, 0);
  rename(moved, path);
  // unlink and unlinkat of a guarded name (traced, then performed), on a copy made for it.
  int copy = open(moved, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (copy >= 0) close(copy);
  unlink(moved);
  copy = open(moved, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (copy >= 0) close(copy);
  unlinkat(AT_FDCWD, moved, 0);
}

static int call_vdprintf_chk(int fd, const char* format, ...) {
  va_list args;
  va_start(args, format);
  int result = BY_NAME(vdprintf_chk_fn, __vdprintf_chk)(fd, 1, format, args);
  va_end(args);
  return result;
}

static int call_vdprintf(int fd, const char* format, ...) {
  va_list args;
  va_start(args, format);
  int result = vdprintf(fd, format, args);
  va_end(args);
  return result;
}

#if FORTIFIED
static int call_vdprintf_by_name(int fd, const char* format, ...) {
  va_list args;
  va_start(args, format);
  int result = BY_NAME(vdprintf_fn, vdprintf)(fd, format, args);
  va_end(args);
  return result;
}
#endif

static void streams(int fd) {
  FILE* stream = fopen(path, "a");
  if (stream) stream = freopen(path, "a", stream);
  if (stream) fclose(stream);
#if WIDE
  stream = BY_NAME(fopen_fn, fopen)(path, "a");
  if (stream) stream = BY_NAME(freopen_fn, freopen)(path, "a", stream);
#else
  stream = BY_NAME(fopen_fn, fopen64)(path, "a");
  if (stream) stream = BY_NAME(freopen_fn, freopen64)(path, "a", stream);
#endif
  if (stream) fclose(stream);
  int copy = dup(fd);
  stream = fdopen(copy, "a");
  if (stream) fclose(stream);
  dprintf(fd, "%s", "ab");
  call_vdprintf(fd, "%s", "ab");
#if !FORTIFIED
  BY_NAME(dprintf_chk_fn, __dprintf_chk)(fd, 1, "%s", "ab");
  call_vdprintf_chk(fd, "%s", "ab");
#else
  (void)call_vdprintf_chk;
  BY_NAME(dprintf_fn, dprintf)(fd, "%s", "ab");
  call_vdprintf_by_name(fd, "%s", "ab");
#endif
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: liveness_probe DIRECTORY\n");
    return 2;
  }
  snprintf(path, sizeof path, "%s/live.safetensors", argv[1]);
  char source_path[4096];
  snprintf(source_path, sizeof source_path, "%s/source.txt", argv[1]);
  int source = open(source_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (source < 0 || write(source, "ab", 2) != 2) return 1;
  memset(buf, 'x', sizeof buf);
  opens();
  int fd = open(path, O_RDWR | O_CREAT, 0644);
  if (fd < 0) return 1;
  writes(fd, source);
  positions_and_sizes(fd);
  reads_and_maps(fd);
  descriptors(fd);
  receives(fd);
  execs();
  renames();
  streams(fd);
  close(source);
  dup2(fd, 170);
  closefrom(170);
  close(fd);
  return 0;
}
