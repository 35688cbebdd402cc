// Reads and mappings of guarded files: passed to the kernel, and reported when the program reads a
// handle that appendguard made write-only or maps it shared and writable.
#include <sys/mman.h>
#include <sys/uio.h>

#include "shim/hook.h"

using namespace appendguard;

namespace {

template <typename Real>
ssize_t read_and_note(const char* operation, int fd, bool moves_position, Real&& real) {
  Description* d = tracked_description(fd);
  ssize_t result = real();
  if (d) keep_errno([&](int error) { note_read(operation, fd, d, moves_position, result, error); });
  return result;
}

}  // namespace

APPENDGUARD_FD_HOOK(ssize_t, read, fd, (int fd, void* buf, size_t count), (fd, buf, count)) {
  return read_and_note("read", fd, true, [&] { return real_read(fd, buf, count); });
}

APPENDGUARD_FD_HOOK(ssize_t, pread, fd, (int fd, void* buf, size_t count, off_t offset),
                    (fd, buf, count, offset)) {
  return read_and_note("pread", fd, false, [&] { return real_pread(fd, buf, count, offset); });
}

APPENDGUARD_FD_HOOK(ssize_t, pread64, fd, (int fd, void* buf, size_t count, off64_t offset),
                    (fd, buf, count, offset)) {
  return read_and_note("pread64", fd, false, [&] { return real_pread64(fd, buf, count, offset); });
}

APPENDGUARD_FD_HOOK(ssize_t, readv, fd, (int fd, const iovec* iov, int iovcnt), (fd, iov, iovcnt)) {
  return read_and_note("readv", fd, true, [&] { return real_readv(fd, iov, iovcnt); });
}

APPENDGUARD_FD_HOOK(ssize_t, preadv, fd, (int fd, const iovec* iov, int iovcnt, off_t offset),
                    (fd, iov, iovcnt, offset)) {
  return read_and_note("preadv", fd, false, [&] { return real_preadv(fd, iov, iovcnt, offset); });
}

APPENDGUARD_FD_HOOK(ssize_t, preadv64, fd, (int fd, const iovec* iov, int iovcnt, off64_t offset),
                    (fd, iov, iovcnt, offset)) {
  return read_and_note("preadv64", fd, false, [&] { return real_preadv64(fd, iov, iovcnt, offset); });
}

APPENDGUARD_FD_HOOK(ssize_t, preadv2, fd, (int fd, const iovec* iov, int iovcnt, off_t offset, int flags),
                    (fd, iov, iovcnt, offset, flags)) {
  return read_and_note("preadv2", fd, offset == -1,
                       [&] { return real_preadv2(fd, iov, iovcnt, offset, flags); });
}

APPENDGUARD_FD_HOOK(ssize_t, preadv64v2, fd,
                    (int fd, const iovec* iov, int iovcnt, off64_t offset, int flags),
                    (fd, iov, iovcnt, offset, flags)) {
  return read_and_note("preadv64v2", fd, offset == -1,
                       [&] { return real_preadv64v2(fd, iov, iovcnt, offset, flags); });
}

namespace {

template <typename Real>
void* map_and_note(int fd, int prot, int flags, Real&& real) {
  Description* d = tracked_description(fd);
  void* result = real();
  if (d) keep_errno([&](int error) { note_mmap(fd, d, prot, flags, result == MAP_FAILED, error); });
  return result;
}

}  // namespace

APPENDGUARD_FD_HOOK(void*, mmap, fd, (void* addr, size_t length, int prot, int flags, int fd, off_t offset),
                    (addr, length, prot, flags, fd, offset)) {
  return map_and_note(fd, prot, flags, [&] { return real_mmap(addr, length, prot, flags, fd, offset); });
}

APPENDGUARD_FD_HOOK(void*, mmap64, fd,
                    (void* addr, size_t length, int prot, int flags, int fd, off64_t offset),
                    (addr, length, prot, flags, fd, offset)) {
  return map_and_note(fd, prot, flags, [&] { return real_mmap64(addr, length, prot, flags, fd, offset); });
}
