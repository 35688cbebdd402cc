// Report stacks (test_report_stacks.py): where a refused write comes from, and where the position left
// the end of file before it. Each step is its own function, kept out of line so that the report names it.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

// Open sites (issue 27: a site recorded again from the same place is read back from the stack): two
// openers of the same frame size called from the same place, so that their sites differ only in one
// return address.
STEP static int open_here_a(const char* path) {
  return open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
}
STEP static int open_here_b(const char* path) {
  return open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
}
STEP static int opens_through(int (*opener)(const char*), const char* path) {
  return opener(path);
}

// Each way into the open hooks (issue 27: the site is read back from the stack above the hook's frame).
STEP static int open_by_open(const char* path) {
  return open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
}
STEP static int open_by_openat(const char* path) {
  return openat(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
}
STEP static int open_by_creat(const char* path) {
  return creat(path, 0644);
}
STEP static int open_by_syscall(const char* path) {
  return (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
}

// A guarded file opened by a signal handler, the process's first need of a stack: libunwind is not
// loaded there (dlopen is not async-signal-safe).
static const char* g_handler_path;
static volatile int g_handler_fd = -1;
static void open_in_handler(int sig) {
  (void)sig;
  g_handler_fd = open(g_handler_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
}

static void say(const char* what, long long result) {
  printf("%s=%lld\n", what, result);
  fflush(stdout);
}

// The ids a report gives for an open (issue 27: the thread id is kept per thread, not asked at every
// open): opens a guarded file, says this process's and thread's ids, and has a write refused there (one
// report naming the open's pid and tid).
static int open_and_refuse(const char* path, const char* who) {
  char key[64];
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "0123456789", 10) != 10) return 1;
  snprintf(key, sizeof key, "%s_pid", who);
  say(key, getpid());
  snprintf(key, sizeof key, "%s_tid", who);
  say(key, syscall(SYS_gettid));
  snprintf(key, sizeof key, "%s_pwrite", who);
  say(key, pwrite(fd, "p", 1, 1));
  close(fd);
  return 0;
}
static const char* g_thread_path;
static void* open_in_thread(void* arg) {
  (void)arg;
  return (void*)(long)open_and_refuse(g_thread_path, "thread");
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
  if (strcmp(name, "two_openers") == 0) {
    // Four files, opened alternately by a and b; each then refuses a write at offset 1 (one report each).
    for (int i = 0; i < 4; ++i) {
      char each[4096];
      snprintf(each, sizeof each, "%s.%d.safetensors", path, i);
      int fd = opens_through(i % 2 ? open_here_b : open_here_a, each);
      if (fd < 0 || write(fd, "0123456789", 10) != 10) return 1;
      say(i % 2 ? "pwrite_b" : "pwrite_a", pwrite(fd, "p", 1, 1));
      close(fd);
    }
    return 0;
  }
  if (strcmp(name, "entry_points") == 0) {
    // Each opener twice from the same place (the second site read back from the stack), each file then
    // refusing a write at offset 1 (one report each).
    static const struct {
      const char* name;
      int (*opener)(const char*);
    } openers[] = {{"open", open_by_open},
                   {"openat", open_by_openat},
                   {"creat", open_by_creat},
                   {"syscall", open_by_syscall}};
    for (int i = 0; i < 8; ++i) {
      char each[4096];
      snprintf(each, sizeof each, "%s.%s.%d.safetensors", path, openers[i / 2].name, i % 2);
      int fd = opens_through(openers[i / 2].opener, each);
      if (fd < 0 || write(fd, "0123456789", 10) != 10) return 1;
      say(each + strlen(path) + 1, pwrite(fd, "p", 1, 1));
      close(fd);
    }
    return 0;
  }
  if (strcmp(name, "ids") == 0) {
    // The main thread, another thread, the main thread again, then a fork child's (the same thread's copy).
    char each[4096];
    snprintf(each, sizeof each, "%s.main.safetensors", path);
    if (open_and_refuse(each, "main") != 0) return 1;
    static char thread_path[4096];
    snprintf(thread_path, sizeof thread_path, "%s.thread.safetensors", path);
    g_thread_path = thread_path;
    pthread_t thread;
    void* thread_result = NULL;
    if (pthread_create(&thread, NULL, open_in_thread, NULL) != 0 ||
        pthread_join(thread, &thread_result) != 0 || thread_result != NULL)
      return 1;
    snprintf(each, sizeof each, "%s.again.safetensors", path);
    if (open_and_refuse(each, "again") != 0) return 1;
    pid_t child = fork();
    if (child == 0) {
      snprintf(each, sizeof each, "%s.child.safetensors", path);
      _exit(open_and_refuse(each, "child"));
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      return 1;
    return 0;
  }
  if (strcmp(name, "opened_in_handler") == 0) {
    g_handler_path = path;
    signal(SIGUSR1, open_in_handler);
    raise(SIGUSR1);
    if (g_handler_fd < 0 || write(g_handler_fd, "0123456789", 10) != 10) return 1;
    say("pwrite", pwrite(g_handler_fd, "p", 1, 1));
    close(g_handler_fd);
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
