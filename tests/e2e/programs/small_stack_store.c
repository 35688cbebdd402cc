// The store paths of the library on a thread with a small stack (test_small_stacks.py): a thread of
// STACK_BYTES writes DIR/NAME.tmp and renames it to DIR/NAME, as safetensors and PyTorch save. MODE:
//   closed     O_WRONLY|O_CREAT|O_TRUNC, closed, then renamed (PyTorch): on a store without rename the
//              library carries the rename out by copying the file;
//   exclusive  O_RDWR|O_CREAT|O_EXCL, renamed while open, then closed (safetensors 0.8's tempfile): on such
//              a store the library spools the file and uploads it at the rename;
//   unrenamed  O_RDWR|O_CREAT|O_EXCL, closed, never renamed: spooled, uploaded at its close.
// Prints key=value lines. Usage: e2e_small_stack_store DIR NAME STACK_BYTES MODE
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char* g_dir;
static const char* g_name;
static const char* g_mode;

static void show(const char* key, long result) {
  if (result < 0) {
    printf("%s=%ld errno=%d\n", key, result, errno);
  } else {
    printf("%s=%ld\n", key, result);
  }
  fflush(stdout);
}

static void* save(void* arg) {
  (void)arg;
  char temporary[512], final[512];  // small: the thread's stack is for the library
  snprintf(temporary, sizeof temporary, "%s/%s.tmp", g_dir, g_name);
  snprintf(final, sizeof final, "%s/%s", g_dir, g_name);
  const int closed = !strcmp(g_mode, "closed");
  int fd = open(closed                         ? temporary
                : !strcmp(g_mode, "unrenamed") ? final
                                               : temporary,
                closed ? O_WRONLY | O_CREAT | O_TRUNC : O_RDWR | O_CREAT | O_EXCL, 0644);
  show("open", fd);
  if (fd < 0) return NULL;
  show("write", write(fd, "0123456789abcdef", 16));
  if (closed) show("close", close(fd));
  if (strcmp(g_mode, "unrenamed") != 0) show("rename", rename(temporary, final));
  if (!closed) show("close", close(fd));
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 5) return 2;
  g_dir = argv[1];
  g_name = argv[2];
  g_mode = argv[4];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (pthread_attr_setstacksize(&attr, strtoul(argv[3], NULL, 0)) != 0) return 5;
  pthread_t thread;
  if (pthread_create(&thread, &attr, save, NULL) != 0) return 6;
  pthread_join(thread, NULL);
  return 0;
}
