#include "shim/user_memory.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <atomic>

#include "shim/real_io.h"

namespace appendguard {
namespace {

constinit std::atomic<bool> g_refused{false};

// The number of bytes copied, or -1 with errno; `write` copies into the program's memory.
long copy_with_kernel(void* local, const void* remote, size_t n, bool write) {
  struct iovec here = {local, n};
  struct iovec there = {const_cast<void*>(remote), n};
  return real_syscall(write ? SYS_process_vm_writev : SYS_process_vm_readv, real_syscall(SYS_getpid), &here,
                      1, &there, 1, 0);
}

// Whether the copy was made; false for memory the kernel cannot reach.
bool copy(void* local, const void* remote, size_t n, bool write) {
  if (n == 0) return true;
  if (!g_refused.load(std::memory_order_relaxed)) {
    const int error = errno;
    const long copied = copy_with_kernel(local, remote, n, write);
    const int why = errno;
    errno = error;
    if (copied == static_cast<long>(n)) return true;
    if (copied >= 0 || why == EFAULT) return false;
    g_refused.store(true, std::memory_order_relaxed);  // ENOSYS, EPERM: touched directly from now on
  }
  if (write)
    memcpy(const_cast<void*>(remote), local, n);
  else
    memcpy(local, remote, n);
  return true;
}

}  // namespace

bool copy_from_program(void* to, const void* from, size_t n) {
  return copy(to, from, n, false);
}

bool copy_to_program(void* to, const void* from, size_t n) {
  return copy(const_cast<void*>(from), to, n, true);
}

long check_program_string(const char* path) {
  constexpr size_t kPathMax = 4096;
  constexpr size_t kChunk = 128;
  char chunk[kChunk];
  for (size_t at = 0; at < kPathMax;) {
    const auto address = reinterpret_cast<uintptr_t>(path) + at;
    size_t n = 4096 - (address & 4095);  // never across a page: a partial copy stops at a bad page
    if (n > kChunk) n = kChunk;
    if (!copy_from_program(chunk, path + at, n)) return -EFAULT;
    if (memchr(chunk, 0, n)) return 0;
    at += n;
  }
  return -ENAMETOOLONG;
}

}  // namespace appendguard
