// fork() while another thread is in the middle of a report (blocked opening a FIFO log): the child's own
// report must not wait for a lock held by a thread that does not exist in the child.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static const char* g_path;

static void write_backwards(const char* path) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (write(fd, "0123456789", 10) != 10) return;
  lseek(fd, 0, SEEK_SET);
  if (write(fd, "x", 1) != -1) printf("unexpected: backward write accepted\n");
  close(fd);
}

static void* reporter(void* arg) {
  (void)arg;
  write_backwards(g_path);  // its report blocks until someone reads the FIFO
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  g_path = argv[1];
  pthread_t thread;
  pthread_create(&thread, NULL, reporter, NULL);
  usleep(300 * 1000);  // let the thread get stuck inside its report
  pid_t child = fork();
  if (child == 0) {
    write_backwards(argv[2]);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  pthread_join(thread, NULL);
  printf("child_exit=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}
