// A preload library placed after libappendguard.so in LD_PRELOAD, so that appendguard's "real" close is
// this one: a close called by any thread but the main one (in held_numbers, only appendguard's committer
// thread closes) publishes its number in slow_close_fd and waits 100 ms before closing, the way a
// preempted thread would. held_numbers reads slow_close_fd to act while the committer is between taking
// a held session out of the set and closing its number: the race test_held_numbers.py checks.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

__attribute__((visibility("default"))) int slow_close_fd = -1;  // read and written with __atomic

int close(int fd) {
  static int (*next_close)(int);
  int (*next)(int) = __atomic_load_n(&next_close, __ATOMIC_ACQUIRE);
  if (!next) {
    next = (int (*)(int))dlsym(RTLD_NEXT, "close");
    __atomic_store_n(&next_close, next, __ATOMIC_RELEASE);
  }
  if (gettid() == getpid()) return next(fd);
  __atomic_store_n(&slow_close_fd, fd, __ATOMIC_RELEASE);
  struct timespec pause = {0, 100 * 1000 * 1000};
  nanosleep(&pause, NULL);
  int result = next(fd);
  __atomic_store_n(&slow_close_fd, -1, __ATOMIC_RELEASE);
  return result;
}
