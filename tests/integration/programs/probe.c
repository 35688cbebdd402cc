// A test program: each subcommand performs one scenario with plain libc calls and prints what the calls
// returned as key=value lines, for the Python tests to check. Built plain, with _FILE_OFFSET_BITS=64
// (the 64-bit names) and with _FORTIFY_SOURCE (the __open_2 family).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
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
#include "errno_text.h"
#include "show_result.h"

extern int __fxstat(int version, int fd, struct stat* st);

#ifndef RWF_NOAPPEND
#define RWF_NOAPPEND 0x00000020
#endif

// Prints "key=result errno=NAME" (errno only when the call failed).
static void fill(char* buf, size_t n, char c) {
  memset(buf, c, n);
}

static int make_file(const char* path, size_t size, char c) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return -1;
  char buf[4096];
  fill(buf, sizeof buf, c);
  while (size > 0) {
    size_t n = size < sizeof buf ? size : sizeof buf;
    if (write(fd, buf, n) != (ssize_t)n) return -1;
    size -= n;
  }
  return close(fd);
}

static int case_dcp(const char* path) {
  // What PyTorch DCP consolidation does: header with "wb", reopen "r+b", seek to the end, append.
  char header[64];
  fill(header, sizeof header, 'H');
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  show("header", write(fd, header, sizeof header));
  close(fd);
  fd = open(path, O_RDWR);
  show("open_rw", fd >= 0 ? 0 : -1);
  show("seek_end", lseek(fd, 0, SEEK_END));
  char tensor[1000];
  for (int i = 0; i < 3; ++i) {
    fill(tensor, sizeof tensor, (char)('0' + i));
    show("tensor", write(fd, tensor, sizeof tensor));
  }
  show("tell", lseek(fd, 0, SEEK_CUR));
  show("close", close(fd));
  return 0;
}

static int case_backward(const char* path) {
  make_file(path, 100, 'a');
  int fd = open(path, O_RDWR);
  show("seek", lseek(fd, 10, SEEK_SET));
  char b[5] = {'b', 'b', 'b', 'b', 'b'};
  show("write_back", write(fd, b, sizeof b));
  show("seek_end", lseek(fd, 0, SEEK_END));
  char c[5] = {'c', 'c', 'c', 'c', 'c'};
  show("write_end", write(fd, c, sizeof c));
  close(fd);
  return 0;
}

static int case_pwrite(const char* path) {
  make_file(path, 100, 'a');
  int fd = open(path, O_RDWR);
  char b[5] = {'b', 'b', 'b', 'b', 'b'};
  show("pwrite_below", pwrite(fd, b, sizeof b, 50));
  show("pwrite_end", pwrite(fd, b, sizeof b, 100));
  show("position", lseek(fd, 0, SEEK_CUR));
  struct iovec iov[2] = {{b, 2}, {b, 3}};
  show("pwritev_below", pwritev(fd, iov, 2, 0));
  show("pwritev_end", pwritev(fd, iov, 2, 105));
  show("writev_at_position", writev(fd, iov, 2));
  close(fd);
  return 0;
}

static int case_dup(const char* path) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  char buf[10];
  fill(buf, sizeof buf, 'x');
  show("write1", write(fd, buf, sizeof buf));
  int d = dup(fd);
  show("dup_position", lseek(d, 0, SEEK_CUR));
  show("write_dup", write(d, buf, sizeof buf));
  show("orig_position", lseek(fd, 0, SEEK_CUR));
  int d2 = fcntl(fd, F_DUPFD_CLOEXEC, 50);
  show("fcntl_dup_position", lseek(d2, 0, SEEK_CUR));
  show("dup2", dup2(fd, 60));
  show("seek_dup2_back", lseek(60, 0, SEEK_SET));
  show("orig_after_dup2_seek", lseek(fd, 0, SEEK_CUR));
  show("write_at_0", write(fd, buf, sizeof buf));
  show("seek_end", lseek(fd, 0, SEEK_END));
  close(fd);
  close(d);
  show("write_last_dup", write(d2, buf, sizeof buf));
  close(d2);
  close(60);
  return 0;
}

static int case_twoopens(const char* path) {
  int a = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int b = open(path, O_RDWR);
  char buf[10];
  fill(buf, sizeof buf, 'x');
  show("write_a", write(a, buf, sizeof buf));
  show("seek_b_end", lseek(b, 0, SEEK_END));
  show("write_b", write(b, buf, sizeof buf));
  show("write_a_stale", write(a, buf, sizeof buf));
  close(a);
  close(b);
  return 0;
}

static int case_noappend(const char* path) {
  make_file(path, 10, 'a');
  int fd = open(path, O_RDWR);
  char b[4] = {'b', 'b', 'b', 'b'};
  struct iovec iov = {b, sizeof b};
  show("pwritev2_noappend", pwritev2(fd, &iov, 1, 10, RWF_NOAPPEND));
  show("pwritev2_plain", pwritev2(fd, &iov, 1, 10, 0));
  show("pwritev2_position", pwritev2(fd, &iov, 1, -1, 0));
  close(fd);
  return 0;
}

static int case_setfl(const char* path) {
  make_file(path, 10, 'a');
  int fd = open(path, O_RDWR);
  int flags = fcntl(fd, F_GETFL);
  show("append_before", (flags & O_APPEND) != 0);
  show("setfl", fcntl(fd, F_SETFL, flags & ~O_APPEND));
  show("append_after", (fcntl(fd, F_GETFL) & O_APPEND) != 0);
  show("seek0", lseek(fd, 0, SEEK_SET));
  char b[3] = {'b', 'b', 'b'};
  show("write_at_0", write(fd, b, sizeof b));
  close(fd);
  return 0;
}

struct thread_job {
  const char* dir;
  int index;
  int failed;
};

static void* thread_writer(void* arg) {
  struct thread_job* job = arg;
  char path[4096];
  snprintf(path, sizeof path, "%s/t%d.safetensors", job->dir, job->index);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    job->failed = 1;
    return NULL;
  }
  char buf[4096];
  for (int i = 0; i < 500; ++i) {
    fill(buf, sizeof buf, (char)('a' + (i + job->index) % 26));
    if (lseek(fd, 0, SEEK_END) != (off_t)i * (off_t)sizeof buf) job->failed = 1;
    if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) job->failed = 1;
  }
  close(fd);
  return NULL;
}

static int case_threads(const char* dir) {
  pthread_t threads[8];
  struct thread_job jobs[8];
  for (int i = 0; i < 8; ++i) {
    jobs[i] = (struct thread_job){dir, i, 0};
    pthread_create(&threads[i], NULL, thread_writer, &jobs[i]);
  }
  int failed = 0;
  for (int i = 0; i < 8; ++i) {
    pthread_join(threads[i], NULL);
    failed += jobs[i].failed;
  }
  show("threads_failed", failed);
  return 0;
}

static int case_fork(const char* path) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  char buf[10];
  fill(buf, sizeof buf, 'p');
  show("parent_write", write(fd, buf, sizeof buf));
  pid_t child = fork();
  if (child == 0) {
    fill(buf, sizeof buf, 'c');
    show("child_write", write(fd, buf, sizeof buf));
    show("child_position", lseek(fd, 0, SEEK_CUR));
    show("child_seek0", lseek(fd, 0, SEEK_SET));
    show("child_write_back", write(fd, buf, sizeof buf));
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  show("child_exit", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  close(fd);
  return 0;
}

static int case_resize(const char* path) {
  make_file(path, 100, 'a');
  int fd = open(path, O_RDWR);
  show("ftruncate_same", ftruncate(fd, 100));
  show("ftruncate_shrink", ftruncate(fd, 50));
  show("truncate_path", truncate(path, 10));
  show("truncate_path_same", truncate(path, 100));
  int e = posix_fallocate(fd, 0, 50);
  printf("posix_fallocate_within=%s\n", errno_text(e));
  e = posix_fallocate(fd, 100, 50);
  printf("posix_fallocate_extend=%s\n", errno_text(e));
  show("fallocate_keep_size", fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4096));
  show("fallocate_punch", fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 10));
  close(fd);
  return 0;
}

// The safetensors 0.8 pattern, then less written than reserved: a new file opened read-write, grown
// with ftruncate, written from 0, then closed ("close") or left open at exit ("exit").
static int case_prealloc(const char* path, const char* ending) {
  char buf[300];
  fill(buf, sizeof buf, 'x');
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
  show("ftruncate_grow", ftruncate(fd, 1000));
  show("seek_end", lseek(fd, 0, SEEK_END));
  struct stat st;
  show("fstat_size", fstat(fd, &st) == 0 ? (long)st.st_size : -1);
  // What fstat compiles to against glibc before 2.33 (version 1: _STAT_VER_LINUX on x86-64).
  show("fxstat_size", __fxstat(1, fd, &st) == 0 ? (long)st.st_size : -1);
  show("seek_start", lseek(fd, 0, SEEK_SET));
  show("write", write(fd, buf, sizeof buf));
  show("fallocate_keep_size", fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 8192));
  show("posix_fallocate_within", posix_fallocate(fd, 0, 900));
  show("ftruncate_cut", ftruncate(fd, 200));
  show("seek_end_after", lseek(fd, 0, SEEK_END));
  show("write_past_end", pwrite(fd, buf, 10, 900));
  if (!strcmp(ending, "exit")) exit(0);
  show("close", close(fd));
  return 0;
}

static int case_read(const char* path) {
  make_file(path, 100, 'a');
  int fd = open(path, O_RDWR);
  char buf[10];
  show("read", read(fd, buf, sizeof buf));
  show("pread", pread(fd, buf, sizeof buf, 0));
  void* map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  show("mmap_shared_write", map == MAP_FAILED ? -1 : 0);
  close(fd);
  int ro = open(path, O_RDONLY);
  show("read_only_read", read(ro, buf, sizeof buf));
  close(ro);
  return 0;
}

static int case_seek(const char* path) {
  make_file(path, 100, 'a');
  int fd = open(path, O_RDWR);
  show("seek_end_minus", lseek(fd, -10, SEEK_END));
  show("seek_cur_plus", lseek(fd, 5, SEEK_CUR));
  show("seek_negative", lseek(fd, -1000, SEEK_CUR));
  show("seek_data", lseek(fd, 20, SEEK_DATA));
  show("seek_hole", lseek(fd, 20, SEEK_HOLE));
  show("seek_data_past", lseek(fd, 200, SEEK_DATA));
  show("seek_past_end", lseek(fd, 1000, SEEK_SET));
  char b = 'b';
  show("write_past_end", write(fd, &b, 1));
  close(fd);
  return 0;
}

static int case_copy(const char* src, const char* dst) {
  int in = open(src, O_RDONLY);
  int out = open(dst, O_RDWR | O_CREAT | O_TRUNC, 0644);
  off_t in_off = 0;
  show("sendfile", sendfile(out, in, &in_off, 1000));
  off64_t in_off64 = 1000;
  show("copy_file_range", copy_file_range(in, &in_off64, out, NULL, 1000, 0));
  int pipefd[2];
  if (pipe(pipefd) != 0) return 1;
  char buf[500];
  fill(buf, sizeof buf, 'p');
  if (write(pipefd[1], buf, sizeof buf) != (ssize_t)sizeof buf) return 1;
  close(pipefd[1]);
  show("splice", splice(pipefd[0], NULL, out, NULL, 500, 0));
  show("position", lseek(out, 0, SEEK_CUR));
  off64_t out_off = 0;
  in_off64 = 0;
  show("copy_file_range_back", copy_file_range(in, &in_off64, out, &out_off, 10, 0));
  close(in);
  close(out);
  return 0;
}

// After the guarded descriptor is closed, the next file to get its number must not be checked as it.
static int reuse_number(int closed, const char* other) {
  int again = open(other, O_RDWR | O_CREAT | O_TRUNC, 0644);
  show("same_number", again == closed);
  char buf[10];
  fill(buf, sizeof buf, 'o');
  show("write_other", write(again, buf, sizeof buf));
  show("seek_other_back", lseek(again, 0, SEEK_SET));
  show("rewrite_other", write(again, buf, sizeof buf));
  close(again);
  return 0;
}

static int case_closerange(const char* guarded, const char* other) {
  int fd = open(guarded, O_RDWR | O_CREAT | O_TRUNC, 0644);
  show("close_range", close_range(fd, fd, 0));
  return reuse_number(fd, other);
}

__attribute__((noinline)) static long culprit_writes_backwards(int fd) {
  char b = 'b';
  lseek(fd, 0, SEEK_SET);
  return write(fd, &b, 1);
}

__attribute__((noinline)) static int case_culprit(const char* path) {
  make_file(path, 10, 'a');
  int fd = open(path, O_RDWR);
  show("culprit", culprit_writes_backwards(fd));
  close(fd);
  return 0;
}

static int case_openat(const char* dir, const char* name) {
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY);
  int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_TRUNC, 0644);
  char buf[10];
  fill(buf, sizeof buf, 'x');
  show("write", write(fd, buf, sizeof buf));
  show("seek0", lseek(fd, 0, SEEK_SET));
  show("write_back", write(fd, buf, sizeof buf));
  close(fd);
  int c = creat("created.safetensors", 0644);
  show("creat_write", write(c, buf, sizeof buf));
  show("creat_pwrite_back", pwrite(c, buf, sizeof buf, 0));
  close(c);
  close(dirfd);
  return 0;
}

static int case_inherited(const char* fd_text) {
  int fd = atoi(fd_text);
  char buf[10];
  fill(buf, sizeof buf, 'i');
  show("write", write(fd, buf, sizeof buf));
  show("seek0", lseek(fd, 0, SEEK_SET));
  show("write_back", write(fd, buf, 1));
  return 0;
}

static int case_rawclose(const char* guarded, const char* other) {
  int fd = open(guarded, O_RDWR | O_CREAT | O_TRUNC, 0644);
  show("raw_close", syscall(SYS_close, fd));
  return reuse_number(fd, other);
}

static int case_freopen_close(const char* guarded, const char* other) {
  int fd = dup(STDIN_FILENO);  // a glibc stream to freopen onto the guarded file
  FILE* stream = fdopen(fd, "r");
  stream = freopen(guarded, "w", stream);
  if (!stream) return 1;
  int number = fileno(stream);
  fputs("through glibc", stream);
  show("fclose", fclose(stream));
  return reuse_number(number, other);
}

// Appends `count` chunks of varying sizes with the usual retry loop for EINTR and short writes.
static int case_chunks(const char* path, const char* count_text) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  int count = atoi(count_text);
  char buf[3000];
  long total = 0, retries = 0;
  for (int i = 0; i < count; ++i) {
    size_t size = 1 + (size_t)(i * 37) % sizeof buf;
    fill(buf, size, (char)('a' + i % 26));
    size_t done = 0;
    while (done < size) {
      ssize_t n = write(fd, buf + done, size - done);
      if (n < 0 && errno == EINTR) {
        ++retries;
        continue;
      }
      if (n <= 0) {
        show("write_failed", n);
        return 1;
      }
      if ((size_t)n < size - done) ++retries;
      done += (size_t)n;
    }
    total += (long)size;
  }
  show("total", total);
  show("retries", retries);
  show("position", lseek(fd, 0, SEEK_CUR));
  show("end", lseek(fd, 0, SEEK_END));
  close(fd);
  return 0;
}

static int case_missing(const char* path) {
  show("open_rw_missing", open(path, O_RDWR));
  return 0;
}

// The mode of a created file reaches the kernel through every open entry point (the open hooks read the
// variadic mode as a fixed parameter): guarded and not, with open, openat and creat.
static int case_modes(const char* dir) {
  umask(0);
  const char* names[] = {"m1.safetensors", "m2.bin", "m3.safetensors", "m4.bin", "m5.safetensors"};
  const mode_t modes[] = {0640, 0604, 0600, 0612, 0620};
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY);
  for (int i = 0; i < 5; ++i) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    int fd = i < 2   ? open(path, O_RDWR | O_CREAT | O_TRUNC, modes[i])
             : i < 4 ? openat(dirfd, names[i], O_WRONLY | O_CREAT | O_EXCL, modes[i])
                     : creat(path, modes[i]);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
      printf("%s=failed errno=%d\n", names[i], errno);
      continue;
    }
    printf("%s=%o\n", names[i], (unsigned)(st.st_mode & 07777));
    close(fd);
  }
  close(dirfd);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: probe CASE PATH [PATH]\n");
    return 2;
  }
  const char* c = argv[1];
  if (!strcmp(c, "dcp")) return case_dcp(argv[2]);
  if (!strcmp(c, "modes")) return case_modes(argv[2]);
  if (!strcmp(c, "backward")) return case_backward(argv[2]);
  if (!strcmp(c, "pwrite")) return case_pwrite(argv[2]);
  if (!strcmp(c, "dup")) return case_dup(argv[2]);
  if (!strcmp(c, "twoopens")) return case_twoopens(argv[2]);
  if (!strcmp(c, "noappend")) return case_noappend(argv[2]);
  if (!strcmp(c, "setfl")) return case_setfl(argv[2]);
  if (!strcmp(c, "threads")) return case_threads(argv[2]);
  if (!strcmp(c, "fork")) return case_fork(argv[2]);
  if (!strcmp(c, "resize")) return case_resize(argv[2]);
  if (!strcmp(c, "prealloc")) return case_prealloc(argv[2], argv[3]);
  if (!strcmp(c, "read")) return case_read(argv[2]);
  if (!strcmp(c, "seek")) return case_seek(argv[2]);
  if (!strcmp(c, "copy") && argc > 3) return case_copy(argv[2], argv[3]);
  if (!strcmp(c, "closerange") && argc > 3) return case_closerange(argv[2], argv[3]);
  if (!strcmp(c, "culprit")) return case_culprit(argv[2]);
  if (!strcmp(c, "openat") && argc > 3) return case_openat(argv[2], argv[3]);
  if (!strcmp(c, "missing")) return case_missing(argv[2]);
  if (!strcmp(c, "inherited")) return case_inherited(argv[2]);
  if (!strcmp(c, "chunks") && argc > 3) return case_chunks(argv[2], argv[3]);
  if (!strcmp(c, "rawclose") && argc > 3) return case_rawclose(argv[2], argv[3]);
  if (!strcmp(c, "freopen_close") && argc > 3) return case_freopen_close(argv[2], argv[3]);
  fprintf(stderr, "probe: unknown case %s\n", c);
  return 2;
}
