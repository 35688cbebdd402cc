// A library whose constructor writes a guarded file before appendguard's own constructor has run
// (preloaded libraries are initialized after the program's dependencies).
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

long early_append_result = -2;
long early_backward_result = -2;

__attribute__((constructor)) static void write_before_main(void) {
  const char* path = getenv("EARLY_PATH");
  if (!path) return;
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  early_append_result = write(fd, "0123456789", 10);
  lseek(fd, 0, SEEK_SET);
  early_backward_result = write(fd, "x", 1);
  close(fd);
}
