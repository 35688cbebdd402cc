// fork() while another thread is in the middle of a report, holding the reporter's lock: the child's own
// report must not wait for a lock held by a thread that does not exist in the child. The thread is held
// inside its report deterministically: the log sink calls gethostname (to expand the log path) under the
// lock, and this program's gethostname (exported, so it is the one the library calls) waits there until
// the fork happened.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char* g_path;
static atomic_int g_calls;
static int g_inside[2];  // the thread tells main it is inside its report
static int g_forked[2];  // main tells the thread the fork happened

int gethostname(char* name, size_t length) {
  if (atomic_fetch_add(&g_calls, 1) == 0) {
    char c = 'r';
    if (write(g_inside[1], &c, 1) != 1) return -1;
    if (read(g_forked[0], &c, 1) != 1) return -1;
  }
  snprintf(name, length, "testhost");
  return 0;
}

static void write_backwards(const char* path) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (write(fd, "0123456789", 10) != 10) return;
  lseek(fd, 0, SEEK_SET);
  if (write(fd, "x", 1) != -1) printf("unexpected: backward write accepted\n");
  close(fd);
}

static void* reporter(void* arg) {
  (void)arg;
  write_backwards(g_path);  // its report waits in gethostname until main forked
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3 || pipe(g_inside) != 0 || pipe(g_forked) != 0) return 2;
  g_path = argv[1];
  pthread_t thread;
  pthread_create(&thread, NULL, reporter, NULL);
  char c;
  if (read(g_inside[0], &c, 1) != 1) return 3;
  pid_t child = fork();
  if (child == 0) {
    write_backwards(argv[2]);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (write(g_forked[1], &c, 1) != 1) return 4;
  pthread_join(thread, NULL);
  printf("child_exit=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  printf("gethostname_calls=%d\n", atomic_load(&g_calls));
  return 0;
}
