// Reads and mappings of guarded files: passed to the kernel, and reported when the program reads a
// handle that appendguard made write-only or maps it shared and writable.
#include <sys/mman.h>
#include <sys/uio.h>

#include "shim/guard_descriptor.h"
#include "shim/guarded.h"
#include "shim/hook.h"

using namespace appendguard;

namespace {

template <typename Real>
ssize_t read_and_note(const char* operation, Description* d, int fd, bool moves_position, Real&& real) {
  ssize_t result = real();
  keep_errno([&](int error) { note_read(operation, fd, d, moves_position, result, error); });
  return result;
}

}  // namespace

ssize_t guarded::read(int fd, void* buf, size_t count, Description* d) {
  return read_and_note("read", d, fd, true, [&] { return real_read(fd, buf, count); });
}

ssize_t guarded::pread(int fd, void* buf, size_t count, off_t offset, Description* d) {
  return read_and_note("pread", d, fd, false, [&] { return real_pread(fd, buf, count, offset); });
}

ssize_t guarded::pread64(int fd, void* buf, size_t count, off64_t offset, Description* d) {
  return read_and_note("pread64", d, fd, false, [&] { return real_pread64(fd, buf, count, offset); });
}

ssize_t guarded::readv(int fd, const iovec* iov, int iovcnt, Description* d) {
  return read_and_note("readv", d, fd, true, [&] { return real_readv(fd, iov, iovcnt); });
}

ssize_t guarded::preadv(int fd, const iovec* iov, int iovcnt, off_t offset, Description* d) {
  return read_and_note("preadv", d, fd, false, [&] { return real_preadv(fd, iov, iovcnt, offset); });
}

ssize_t guarded::preadv64(int fd, const iovec* iov, int iovcnt, off64_t offset, Description* d) {
  return read_and_note("preadv64", d, fd, false, [&] { return real_preadv64(fd, iov, iovcnt, offset); });
}

ssize_t guarded::preadv2(int fd, const iovec* iov, int iovcnt, off_t offset, int flags, Description* d) {
  return read_and_note("preadv2", d, fd, offset == -1,
                       [&] { return real_preadv2(fd, iov, iovcnt, offset, flags); });
}

ssize_t guarded::preadv64v2(int fd, const iovec* iov, int iovcnt, off64_t offset, int flags, Description* d) {
  return read_and_note("preadv64v2", d, fd, offset == -1,
                       [&] { return real_preadv64v2(fd, iov, iovcnt, offset, flags); });
}

namespace {

template <typename Real>
void* map_and_note(const char* operation, Description* d, int fd, int prot, int flags, Real&& real) {
  void* result = real();
  keep_errno([&](int error) { note_mmap(operation, fd, d, prot, flags, result == MAP_FAILED, error); });
  return result;
}

}  // namespace

void* guarded::mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset, Description* d) {
  return map_and_note("mmap", d, fd, prot, flags,
                      [&] { return real_mmap(addr, length, prot, flags, fd, offset); });
}

void* guarded::mmap64(void* addr, size_t length, int prot, int flags, int fd, off64_t offset,
                      Description* d) {
  return map_and_note("mmap64", d, fd, prot, flags,
                      [&] { return real_mmap64(addr, length, prot, flags, fd, offset); });
}
