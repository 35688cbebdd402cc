// A held session across a vfork child that exits without exec: writes a 64-byte header to PATH
// ("wb" + close: held on a write-once store), starts a vfork child that _exits at once (its exit closes
// its copy of the held descriptor: a FLUSH, which rclone takes as the end of the upload), then reopens
// PATH ("r+b") and appends 4 tensors of 5000 bytes ('0', '1', '2', '3'). Prints done=1, or what failed.
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int fail(const char* what) {
  perror(what);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  char header[64];
  memset(header, 'H', sizeof header);
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return fail("open header");
  if (write(fd, header, sizeof header) != (ssize_t)sizeof header) return fail("write header");
  if (close(fd) != 0) return fail("close header");
  pid_t pid = vfork();
  if (pid == 0) _exit(0);
  if (pid < 0 || waitpid(pid, NULL, 0) != pid) return fail("vfork");
  fd = open(argv[1], O_RDWR);
  if (fd < 0) return fail("reopen");
  if (lseek(fd, 0, SEEK_END) != (off_t)sizeof header) return fail("lseek");
  char tensor[5000];
  for (int i = 0; i < 4; ++i) {
    memset(tensor, '0' + i, sizeof tensor);
    if (write(fd, tensor, sizeof tensor) != (ssize_t)sizeof tensor) return fail("write tensor");
  }
  if (close(fd) != 0) return fail("close");
  printf("done=1\n");
  return 0;
}
