// The write family. Untracked descriptors cost one table load before the real call.
#include <sys/sendfile.h>
#include <sys/uio.h>

#include "shim/guard_write.h"
#include "shim/guarded.h"
#include "shim/hook.h"

using namespace appendguard;

#ifndef RWF_APPEND
#define RWF_APPEND 0x00000010
#endif
#ifndef RWF_NOAPPEND
#define RWF_NOAPPEND 0x00000020  // Linux 6.9
#endif

namespace {

uint64_t iov_total(const iovec* iov, int count) {
  uint64_t total = 0;
  for (int i = 0; i < count && iov; ++i) total += iov[i].iov_len;
  return total;
}

WriteRequest for_pwritev2(uint64_t count, off64_t offset, int flags) {
  WriteRequest request =
      offset == -1 ? WriteRequest::at_position(count) : WriteRequest::at_offset(count, offset);
  request.rwf_append = (flags & RWF_APPEND) != 0;
  request.rwf_noappend = (flags & RWF_NOAPPEND) != 0;
  return request;
}

WriteRequest for_copy(uint64_t count, const off64_t* out_offset) {
  return out_offset ? WriteRequest::at_offset(count, *out_offset) : WriteRequest::at_position(count);
}

// sendfile, copy_file_range and splice fail on O_APPEND descriptors (EBADF/EINVAL): in enforce mode,
// copy with reads and writes instead.
bool copies_by_write(const Description* d) {
  return g_config->mode == Mode::kEnforce && d->kernel_appends;
}

}  // namespace

ssize_t guarded::write(int fd, const void* buf, size_t count, Description* d) {
  return guarded_write("write", fd, d, WriteRequest::at_position(count), [&] {
    if (__builtin_expect(d->position == 0, 0)) note_first_bytes(d, buf, count);
    return real_write(fd, buf, count);
  });
}

ssize_t guarded::pwrite(int fd, const void* buf, size_t count, off_t offset, Description* d) {
  return guarded_write("pwrite", fd, d, WriteRequest::at_offset(count, offset),
                       [&] { return real_pwrite(fd, buf, count, offset); });
}

ssize_t guarded::pwrite64(int fd, const void* buf, size_t count, off64_t offset, Description* d) {
  return guarded_write("pwrite64", fd, d, WriteRequest::at_offset(count, offset),
                       [&] { return real_pwrite64(fd, buf, count, offset); });
}

ssize_t guarded::writev(int fd, const iovec* iov, int iovcnt, Description* d) {
  return guarded_write("writev", fd, d, WriteRequest::at_position(iov_total(iov, iovcnt)),
                       [&] { return real_writev(fd, iov, iovcnt); });
}

ssize_t guarded::pwritev(int fd, const iovec* iov, int iovcnt, off_t offset, Description* d) {
  return guarded_write("pwritev", fd, d, WriteRequest::at_offset(iov_total(iov, iovcnt), offset),
                       [&] { return real_pwritev(fd, iov, iovcnt, offset); });
}

ssize_t guarded::pwritev64(int fd, const iovec* iov, int iovcnt, off64_t offset, Description* d) {
  return guarded_write("pwritev64", fd, d, WriteRequest::at_offset(iov_total(iov, iovcnt), offset),
                       [&] { return real_pwritev64(fd, iov, iovcnt, offset); });
}

ssize_t guarded::pwritev2(int fd, const iovec* iov, int iovcnt, off_t offset, int flags, Description* d) {
  return guarded_write("pwritev2", fd, d, for_pwritev2(iov_total(iov, iovcnt), offset, flags),
                       [&] { return real_pwritev2(fd, iov, iovcnt, offset, flags); });
}

ssize_t guarded::pwritev64v2(int fd, const iovec* iov, int iovcnt, off64_t offset, int flags,
                             Description* d) {
  return guarded_write("pwritev64v2", fd, d, for_pwritev2(iov_total(iov, iovcnt), offset, flags),
                       [&] { return real_pwritev64v2(fd, iov, iovcnt, offset, flags); });
}

// The copy into a guarded descriptor, then its input noted if it is one of ours (after the output's lock
// is released: the input may be the same file).
template <typename Copy>
ssize_t copy_and_note_input(const char* operation, int in_fd, bool moves_input, Copy&& copy) {
  ssize_t result = copy();
  if (__builtin_expect(g_files.slot(in_fd) != nullptr, 0))
    note_copy_input(operation, in_fd, moves_input, result);
  return result;
}

ssize_t guarded::sendfile(int out_fd, int in_fd, off_t* offset, size_t count, Description* d) {
  return copy_and_note_input("sendfile", in_fd, !offset, [&] {
    return guarded_write("sendfile", out_fd, d, WriteRequest::at_position(count), [&]() -> ssize_t {
      if (copies_by_write(d)) return copy_by_write(in_fd, offset, out_fd, nullptr, count);
      return real_sendfile(out_fd, in_fd, offset, count);
    });
  });
}

ssize_t guarded::sendfile64(int out_fd, int in_fd, off64_t* offset, size_t count, Description* d) {
  return copy_and_note_input("sendfile64", in_fd, !offset, [&] {
    return guarded_write("sendfile64", out_fd, d, WriteRequest::at_position(count), [&]() -> ssize_t {
      if (copies_by_write(d)) return copy_by_write(in_fd, offset, out_fd, nullptr, count);
      return real_sendfile64(out_fd, in_fd, offset, count);
    });
  });
}

ssize_t guarded::copy_file_range(int in_fd, off64_t* in_offset, int out_fd, off64_t* out_offset, size_t count,
                                 unsigned int flags, Description* d) {
  return copy_and_note_input("copy_file_range", in_fd, !in_offset, [&] {
    return guarded_write("copy_file_range", out_fd, d, for_copy(count, out_offset), [&]() -> ssize_t {
      if (copies_by_write(d)) return copy_by_write(in_fd, in_offset, out_fd, out_offset, count);
      return real_copy_file_range(in_fd, in_offset, out_fd, out_offset, count, flags);
    });
  });
}

ssize_t guarded::splice(int in_fd, off64_t* in_offset, int out_fd, off64_t* out_offset, size_t count,
                        unsigned int flags, Description* d) {
  return copy_and_note_input("splice", in_fd, !in_offset, [&] {
    return guarded_write("splice", out_fd, d, for_copy(count, out_offset), [&]() -> ssize_t {
      if (copies_by_write(d)) return copy_by_write(in_fd, in_offset, out_fd, out_offset, count);
      return real_splice(in_fd, in_offset, out_fd, out_offset, count, flags);
    });
  });
}
