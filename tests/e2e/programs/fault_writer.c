// An end-to-end test program: the DCP pattern (header with O_WRONLY|O_CREAT|O_TRUNC, reopen O_RDWR,
// lseek(SEEK_END), append) with a C retry loop around write(2), for the fault options of appendonlyfs.
//
//   fault_writer retry PATH TOTAL CHUNK [SIGNAL_US]
//       appends TOTAL pattern bytes in CHUNK-byte write() calls; a short count continues with the rest
//       and EINTR retries the same bytes. With SIGNAL_US, SIGALRM (handler installed without SA_RESTART)
//       fires every SIGNAL_US microseconds during the writes.
//   fault_writer errors PATH TOTAL CHUNK
//       appends like retry, but on an error other than EINTR retries the same chunk at most once more,
//       then stops; prints every failure and the bytes reported written.
//   retry-new, errors-new: the same on one handle opened O_RDWR|O_CREAT|O_TRUNC that writes the header
//       and then the data (no reopen: the pattern an S3 mount accepts).
//
// Output (key=value lines): header, seek_end, shorts, eintr, signals, errors, error=<errno name>
// (one per failure), retry_after_error=<result>, written (pattern bytes reported written), tell
// (lseek(SEEK_CUR) afterwards, must be 64 + written), end (lseek(SEEK_END)), close.
// The pattern byte at pattern offset i is (i * 7 + i / 251) % 256; the header is 64 bytes of 'H'.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include "errno_text.h"

static volatile sig_atomic_t g_signals = 0;

static void on_alarm(int sig) {
  (void)sig;
  ++g_signals;
}

static unsigned char pattern_byte(long i) {
  return (unsigned char)((i * 7 + i / 251) % 256);
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: fault_writer retry|errors PATH TOTAL CHUNK [SIGNAL_US]\n");
    return 2;
  }
  const char* mode = argv[1];
  const char* path = argv[2];
  long total = atol(argv[3]);
  long chunk = atol(argv[4]);
  long signal_us = argc > 5 ? atol(argv[5]) : 0;
  int stop_on_error = strncmp(mode, "errors", 6) == 0;
  int fresh = strstr(mode, "-new") != NULL;
  if (!stop_on_error && strncmp(mode, "retry", 5) != 0) return 2;

  unsigned char* data = malloc((size_t)total);
  for (long i = 0; i < total; ++i) data[i] = pattern_byte(i);

  char header[64];
  memset(header, 'H', sizeof header);
  int fd = open(path, fresh ? O_RDWR | O_CREAT | O_TRUNC : O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    printf("open_header=-1 errno=%s\n", errno_text(errno));
    return 1;
  }
  printf("header=%ld\n", (long)write(fd, header, sizeof header));
  if (!fresh) {
    close(fd);
    fd = open(path, O_RDWR);
    if (fd < 0) {
      printf("open_rw=-1 errno=%s\n", errno_text(errno));
      return 1;
    }
  }
  printf("seek_end=%ld\n", (long)lseek(fd, 0, SEEK_END));

  if (signal_us > 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;  // no SA_RESTART: an interrupted blocking call may return EINTR
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval timer = {{0, signal_us}, {0, signal_us}};
    setitimer(ITIMER_REAL, &timer, NULL);
  }

  long written = 0, shorts = 0, eintr = 0, errors = 0;
  int failed = 0;
  while (written < total && !failed) {
    long want = total - written < chunk ? total - written : chunk;
    long done = 0;
    int retried = 0;
    while (done < want) {
      ssize_t n = write(fd, data + written + done, (size_t)(want - done));
      if (n < 0 && errno == EINTR) {
        ++eintr;
        continue;
      }
      if (n < 0) {
        ++errors;
        printf("error=%s at=%ld\n", errno_text(errno), written + done);
        if (!stop_on_error || retried) {
          failed = 1;
          break;
        }
        retried = 1;
        n = write(fd, data + written + done, (size_t)(want - done));
        if (n < 0) {
          printf("retry_after_error=-1 errno=%s\n", errno_text(errno));
          ++errors;
          failed = 1;
          break;
        }
        printf("retry_after_error=%ld\n", (long)n);
      }
      if (n < want - done) ++shorts;
      done += n;
    }
    written += done;
  }
  if (signal_us > 0) {
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
  }
  printf("shorts=%ld\neintr=%ld\nsignals=%ld\nerrors=%ld\nwritten=%ld\n", shorts, eintr, (long)g_signals,
         errors, written);
  printf("tell=%ld\n", (long)lseek(fd, 0, SEEK_CUR));
  printf("end=%ld\n", (long)lseek(fd, 0, SEEK_END));
  printf("close=%d\n", close(fd));
  free(data);
  return failed ? 3 : 0;
}
