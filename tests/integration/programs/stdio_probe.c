// A test program for streams: each subcommand runs one stdio scenario on the file named by its argument
// and prints what the calls returned as key=value lines. Built -O2 (putc_unlocked and putchar are then
// inline: they only call __overflow when the buffer is full) and also with _FORTIFY_SOURCE (fprintf
// becomes __fprintf_chk, dprintf __dprintf_chk).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "errno_text.h"

// "key=result", plus " errno=NAME" when `failed`. errno is read before printing.
static void show_if(const char* key, long result, int failed) {
  int e = errno;
  if (failed) {
    printf("%s=%ld errno=%s\n", key, result, errno_text(e));
  } else {
    printf("%s=%ld\n", key, result);
  }
  fflush(stdout);
}

static void show(const char* key, long result) {
  show_if(key, result, result < 0);
}
static void show_stream_call(const char* key, long result, long expected) {
  show_if(key, result, result != expected);
}
static void show_stream(const char* key, FILE* f) {
  show_if(key, f ? 0 : -1, f == NULL);
}

// The file every scenario starts from: "HEADER" written through a stream of its own.
static void write_header(const char* path) {
  FILE* f = fopen(path, "wb");
  show_stream("header_open", f);
  if (!f) exit(1);
  show_stream_call("header_write", (long)fwrite("HEADER", 1, 6, f), 6);
  show_stream_call("header_close", fclose(f), 0);
}

static FILE* open_at_end(const char* path) {
  write_header(path);
  FILE* f = fopen(path, "r+b");
  show_stream("open", f);
  if (!f) exit(1);
  show("seek_end", fseek(f, 0, SEEK_END));
  show("tell", ftell(f));
  return f;
}

// Every way of putting bytes into a stream, appended in order.
static int case_append(const char* path) {
  FILE* f = open_at_end(path);
  show_stream_call("fwrite", (long)fwrite("ABCD", 1, 4, f), 4);
  show("fprintf", fprintf(f, "[%d:%s]", 42, "fp"));
  show("fputs", fputs("puts;", f));
  show("fputc", fputc('c', f));
  show("putc", putc('p', f));
  for (int i = 0; i < 10000; ++i) putc_unlocked('0' + i % 10, f);  // inline; overflows the buffer
  show("putc_unlocked_ferror", ferror(f));
  show("tell_after", ftell(f));
  show("fflush", fflush(f));
  show("fileno_valid", fileno(f) >= 0 ? 0 : -1);
  show("fsync", fsync(fileno(f)));
  show("write_fd", write(fileno(f), "FD", 2));
  show("lseek64_cur", (long)lseek64(fileno(f), 0, SEEK_CUR));
  show("fwrite_after_fd", (long)fwrite("tail", 1, 4, f));
  show("fclose", fclose(f));
  return 0;
}

// A seek back and a write: refused when the buffer is flushed, nothing reaches the file.
static int case_seek_back(const char* path) {
  FILE* f = open_at_end(path);
  show_stream_call("fwrite_end", (long)fwrite("GOOD", 1, 4, f), 4);
  show("seek_start", fseek(f, 0, SEEK_SET));
  show_stream_call("fwrite_start", (long)fwrite("BAD", 1, 3, f), 3);
  show("fflush", fflush(f));
  show("ferror", ferror(f));
  show("tell_after", ftell(f));
  show("fclose", fclose(f));
  return 0;
}

// The bytes go into the buffer through the inline putc_unlocked; fclose's flush is refused.
static int case_seek_back_putc(const char* path) {
  FILE* f = open_at_end(path);
  show("seeko_start", fseeko(f, 2, SEEK_SET));
  for (int i = 0; i < 100; ++i) putc_unlocked('x', f);
  show("ferror_before_close", ferror(f));
  show("fclose", fclose(f));
  return 0;
}

// A write larger than the buffer goes straight to the file: refused at fwrite itself (a short count).
static int case_seek_back_large(const char* path) {
  FILE* f = open_at_end(path);
  show("seeko64_start", fseeko64(f, 0, SEEK_SET));
  static char big[100000];
  memset(big, 'L', sizeof big);
  show_stream_call("fwrite_large", (long)fwrite(big, 1, sizeof big, f), (long)sizeof big);
  show("ferror", ferror(f));
  show("fclose", fclose(f));
  return 0;
}

static int case_fsetpos(const char* path) {
  FILE* f = open_at_end(path);
  fpos_t at_end;
  show("fgetpos", fgetpos(f, &at_end));
  show_stream_call("fwrite_end", (long)fwrite("1234", 1, 4, f), 4);
  show("fsetpos_back", fsetpos(f, &at_end));  // now 4 bytes before the end
  show("tell_back", ftell(f));
  show_stream_call("fwrite_back", (long)fwrite("no", 1, 2, f), 2);
  show("fflush_back", fflush(f));
  clearerr(f);
  show("seek_end_again", fseek(f, 0, SEEK_END));
  fpos64_t end64;
  show("fgetpos64", fgetpos64(f, &end64));
  show("fsetpos64_end", fsetpos64(f, &end64));
  show_stream_call("fwrite_end_again", (long)fwrite("56", 1, 2, f), 2);
  show("fflush_end", fflush(f));
  show("fclose", fclose(f));
  return 0;
}

static int case_rewind(const char* path) {
  FILE* f = open_at_end(path);
  rewind(f);
  show("tell_rewound", ftell(f));
  show("fputs", fputs("rewound", f));
  show("fflush", fflush(f));
  show("fclose", fclose(f));
  return 0;
}

// freopen of a stream glibc opened: the mode is rewritten and the descriptor tracked.
static int case_freopen(const char* path) {
  write_header(path);
  FILE* f = fopen("/dev/null", "w");
  FILE* g = freopen(path, "r+b", f);
  show_stream("freopen", g);
  if (!g) return 1;
  show("same_stream", g == f ? 0 : -1);
  int flags = fcntl(fileno(g), F_GETFL);
  show("access_write_only", (flags & O_ACCMODE) == O_WRONLY ? 1 : 0);
  show("seek_end", fseek(g, 0, SEEK_END));
  show_stream_call("fwrite", (long)fwrite("APPENDED", 1, 8, g), 8);
  show("fflush", fflush(g));
  show("seek_start", fseek(g, 0, SEEK_SET));
  show_stream_call("fwrite_start", (long)fwrite("back", 1, 4, g), 4);  // not checked: see docs/stdio.md
  show("fflush_start", fflush(g));
  show("lseek_fd_start", (long)lseek(fileno(g), 0, SEEK_SET));
  show("write_fd_start", write(fileno(g), "FD", 2));  // checked at the descriptor
  show("fclose", fclose(g));
  FILE* missing = freopen("/nonexistent-dir/x.safetensors", "r+b", fopen("/dev/null", "w"));
  show_stream("freopen_missing", missing);
  return 0;
}

// freopen of one of our own streams (glibc's freopen cannot reopen it): still checked afterwards.
static int case_freopen_ours(const char* path) {
  FILE* f = fopen(path, "wb");
  show_stream("open", f);
  show_stream_call("fwrite", (long)fwrite("HEADER", 1, 6, f), 6);
  FILE* g = freopen(NULL, "r+b", f);
  show_stream("freopen", g);
  if (!g) return 1;
  show("same_stream", g == f ? 0 : -1);
  show("seek_end", fseek(g, 0, SEEK_END));
  show("tell", ftell(g));
  show_stream_call("fwrite_end", (long)fwrite("MORE", 1, 4, g), 4);
  show("seek_start", fseek(g, 0, SEEK_SET));
  show_stream_call("fwrite_start", (long)fwrite("bad", 1, 3, g), 3);
  show("fflush", fflush(g));
  show("fclose", fclose(g));
  return 0;
}

static int case_fdopen(const char* path) {
  write_header(path);
  int fd = open(path, O_RDWR);
  show("open_fd", fd);
  FILE* f = fdopen(fd, "r+b");
  show_stream("fdopen", f);
  if (!f) return 1;
  show("fileno_same", fileno(f) == fd ? 0 : -1);
  show("seek_end", fseek(f, 0, SEEK_END));
  show("fprintf_end", fprintf(f, "fd%d", 1));
  show("fflush_end", fflush(f));
  show("seek_start", fseek(f, 0, SEEK_SET));
  show("fprintf_start", fprintf(f, "no"));
  show("fflush_start", fflush(f));
  show("fclose", fclose(f));
  show("fd_closed", fcntl(fd, F_GETFD) < 0 && errno == EBADF ? 1 : 0);
  int fd2 = open(path, O_RDWR);
  FILE* a = fdopen(fd2, "a");
  show_stream("fdopen_append", a);
  if (!a) return 1;
  show("seek_start_append", fseek(a, 0, SEEK_SET));
  show("fputs_append", fputs("+a", a));  // "a" streams write at the end wherever they seeked
  show("fclose_append", fclose(a));
  return 0;
}

static int case_missing(const char* path) {
  FILE* f = fopen(path, "r+b");
  show_stream("open_missing", f);
  show("exists_after", access(path, F_OK) == 0 ? 1 : 0);
  FILE* bad = fopen(path, "z");
  show_stream("open_invalid_mode", bad);
  write_header(path);
  FILE* x = fopen(path, "wx");
  show_stream("open_exclusive", x);
  return 0;
}

static int case_dprintf(const char* path) {
  write_header(path);
  int fd = open(path, O_RDWR);
  show("seek_end", (long)lseek(fd, 0, SEEK_END));
  show("dprintf_end", dprintf(fd, "n=%d;", 7));
  show("seek_start", (long)lseek(fd, 0, SEEK_SET));
  show("dprintf_start", dprintf(fd, "overwrite%s", "!"));
  show("tell", (long)lseek(fd, 0, SEEK_CUR));
  show("close", close(fd));
  return 0;
}

// Reads of an "r+" stream: enforce mode made the handle write-only; audit mode leaves it readable.
static int case_read(const char* path) {
  write_header(path);
  FILE* f = fopen(path, "r+b");
  show_stream("open", f);
  if (!f) return 1;
  char buf[16] = {0};
  size_t n = fread(buf, 1, 6, f);
  show_if("fread", (long)n, n != 6);
  printf("read_text=%s\n", buf);
  show("fclose", fclose(f));
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s case path\n", argv[0]);
    return 2;
  }
  struct {
    const char* name;
    int (*run)(const char*);
  } cases[] = {
      {"append", case_append},
      {"seek_back", case_seek_back},
      {"seek_back_putc", case_seek_back_putc},
      {"seek_back_large", case_seek_back_large},
      {"fsetpos", case_fsetpos},
      {"rewind", case_rewind},
      {"freopen", case_freopen},
      {"freopen_ours", case_freopen_ours},
      {"fdopen", case_fdopen},
      {"missing", case_missing},
      {"dprintf", case_dprintf},
      {"read", case_read},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    if (strcmp(cases[i].name, argv[1]) == 0) return cases[i].run(argv[2]);
  }
  fprintf(stderr, "unknown case %s\n", argv[1]);
  return 2;
}
