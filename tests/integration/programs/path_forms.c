// One file reached by several path forms (issue 24, items 15 and 17): each form opens the file for writing
// without O_APPEND and writes one byte at offset 0 of its 10 bytes; a guarded open refuses that write.
// Usage: path_forms relative DIR NAME     chdir(DIR), open(NAME)
//        path_forms openat DIR NAME       openat(open(DIR), NAME)
//        path_forms absolute PATH
//        path_forms procfd PATH           open(PATH, O_RDONLY), then open("/proc/self/fd/N")
// Prints "pwrite=RESULT errno=E".
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int fd = -1;
  if (!strcmp(argv[1], "relative") && argc > 3) {
    if (chdir(argv[2]) != 0) return 3;
    fd = open(argv[3], O_WRONLY);
  } else if (!strcmp(argv[1], "openat") && argc > 3) {
    int dir = open(argv[2], O_RDONLY | O_DIRECTORY);
    if (dir < 0) return 3;
    fd = openat(dir, argv[3], O_WRONLY);
  } else if (!strcmp(argv[1], "absolute")) {
    fd = open(argv[2], O_WRONLY);
  } else if (!strcmp(argv[1], "procfd")) {
    int reader = open(argv[2], O_RDONLY);
    if (reader < 0) return 3;
    char name[64];
    snprintf(name, sizeof name, "/proc/self/fd/%d", reader);
    fd = open(name, O_WRONLY);
  } else {
    return 2;
  }
  if (fd < 0) return 4;
  long result = pwrite(fd, "X", 1, 0);
  printf("pwrite=%ld errno=%d\n", result, result < 0 ? errno : 0);
  return 0;
}
