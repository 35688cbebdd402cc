// Report stacks (test_report_stacks.py): where a refused write comes from, and where the position left
// the end of file before it. Each step is its own function, kept out of line so that the report names it.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define STEP __attribute__((noinline, noclone))

// stdio: the refused write reaches the file through libc's frames (fflush, _IO_*), above ours.
STEP static int culprit_rewrites_stream_start(FILE* f) {
  if (fseek(f, 0, SEEK_SET) != 0) return -1;
  fputs("H", f);
  return fflush(f);
}

STEP static off_t seek_to_start(int fd) {
  return lseek(fd, 0, SEEK_SET);
}
STEP static off_t tell_here(int fd) {
  return lseek(fd, 0, SEEK_CUR);
}
STEP static off_t return_to_end(int fd) {
  return lseek(fd, 0, SEEK_END);
}
STEP static off_t seek_into_middle(int fd) {
  return lseek(fd, 2, SEEK_SET);
}
STEP static ssize_t write_header_later(int fd) {
  return write(fd, "h", 1);
}
STEP static int fseek_to_start(FILE* f) {
  return fseek(f, 0, SEEK_SET);
}
STEP static int fwrite_later(FILE* f) {
  fputs("h", f);
  return fflush(f);
}

static void say(const char* what, long long result) {
  printf("%s=%lld\n", what, result);
  fflush(stdout);
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const char* name = argv[1];
  const char* path = argv[2];
  if (strcmp(name, "stdio") == 0) {
    FILE* f = fopen(path, "w");
    if (!f) return 1;
    fputs("0123456789", f);
    fflush(f);
    say("flush", culprit_rewrites_stream_start(f));
    fclose(f);
    return 0;
  }
  if (strcmp(name, "fseek") == 0) {
    FILE* f = fopen(path, "w");
    if (!f) return 1;
    fputs("0123456789", f);
    fflush(f);
    say("fseek", fseek_to_start(f));
    say("flush", fwrite_later(f));
    fclose(f);
    return 0;
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 1;
  say("write", write(fd, "0123456789", 10));
  if (strcmp(name, "seek") == 0) {
    // The seek leaves the end in one function, a tell elsewhere records nothing, the write comes later.
    say("seek", seek_to_start(fd));
    say("tell", tell_here(fd));
    say("write_later", write_header_later(fd));
  } else if (strcmp(name, "seek_again") == 0) {
    // Back at the end the first site is forgotten; the next seek that leaves the end is the one named.
    say("seek", seek_to_start(fd));
    say("end", return_to_end(fd));
    say("write_end", write(fd, "e", 1));
    say("middle", seek_into_middle(fd));
    say("write_later", write_header_later(fd));
  } else if (strcmp(name, "no_seek") == 0) {
    // A refused pwrite names no seek: the position has nothing to do with it.
    say("seek", seek_to_start(fd));
    say("pwrite", pwrite(fd, "p", 1, 1));
  } else {
    return 2;
  }
  close(fd);
  return 0;
}
