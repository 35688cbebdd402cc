#include "shim/cookie_stream.h"

#include <stdio_ext.h>
#include <stdlib.h>

#include "shim/guard_descriptor.h"
#include "shim/guard_seek.h"
#include "shim/guard_write.h"
#include "shim/hook.h"

namespace appendguard {

struct StreamCookie {
  int fd = -1;
  FILE* stream = nullptr;
  // The last callback was a SEEK_SET: a read now may be glibc's own, aligning its buffer after fseek.
  bool after_seek_set = false;
};

namespace {

// Found by descriptor: freopen is the only reader, fopen/fclose of guarded files the only writers.
constinit FdSlots<StreamCookie, kMaxTrackedFd> g_cookie_of_fd;  // mapped in chunks when used

bool registrable(int fd) {
  return fd >= 0 && fd < kMaxTrackedFd;
}

void register_cookie(StreamCookie* c) {
  if (registrable(c->fd)) g_cookie_of_fd[c->fd].store(c, std::memory_order_release);
}

void unregister_cookie(StreamCookie* c) {
  if (!registrable(c->fd)) return;
  StreamCookie* expected = c;
  g_cookie_of_fd[c->fd].compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
}

StreamCookie* cookie_of(FILE* stream) {
  int fd = stream->_fileno;
  if (!registrable(fd)) return nullptr;
  StreamCookie* c = g_cookie_of_fd.load(fd, std::memory_order_acquire);
  return c && c->stream == stream ? c : nullptr;
}

ssize_t write_once(int fd, const char* buf, size_t size) {
  Description* d = tracked_description(fd);
  if (!d) return real_write(fd, buf, size);
  return guarded_write("stdio_write", fd, d, WriteRequest::at_position(size),
                       [&] { return real_write(fd, buf, size); });
}

// Like glibc's own file streams: write until done or an error, and report how much went out. A refused
// write returns 0 (fopencookie's write must not return a negative count); glibc then fails the stdio
// call, sets the error indicator and drops the buffered bytes, so fclose does not send them again.
ssize_t cookie_write(void* cookie, const char* buf, size_t size) {
  auto* c = static_cast<StreamCookie*>(cookie);
  c->after_seek_set = false;
  int fd = c->fd;
  if (fd < 0) {
    errno = EBADF;
    return 0;
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = write_once(fd, buf + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

void advance_position(int fd, Description* d, ssize_t count) {
  if (count <= 0) return;
  if (HeldFile file(fd, d); file) d->position += static_cast<uint64_t>(count);
}

// Reads are reported like descriptor reads, except right after a SEEK_SET: glibc's fseek to an offset
// that is not a multiple of the buffer size reads the start of that block itself, and the program must
// not be blamed for it.
ssize_t cookie_read(void* cookie, char* buf, size_t size) {
  auto* c = static_cast<StreamCookie*>(cookie);
  const bool maybe_glibc = c->after_seek_set;
  c->after_seek_set = false;
  int fd = c->fd;
  if (fd < 0) {
    errno = EBADF;
    return -1;
  }
  Description* d = tracked_description(fd);
  ssize_t result = real_read(fd, buf, size);
  if (d) {
    keep_errno([&](int error) {
      if (maybe_glibc) {
        advance_position(fd, d, result);
      } else {
        note_read("stdio_read", fd, d, true, result, error);
      }
    });
  }
  return result;
}

int cookie_seek(void* cookie, off64_t* offset, int whence) {
  auto* c = static_cast<StreamCookie*>(cookie);
  c->after_seek_set = whence == SEEK_SET;
  int fd = c->fd;
  if (fd < 0) {
    errno = EBADF;
    return -1;
  }
  const off64_t requested = *offset;
  auto real_seek = [&] { return real_lseek64(fd, requested, whence); };
  Description* d = tracked_description(fd);
  off64_t result = d ? guarded_seek("stdio_seek", fd, d, requested, whence, real_seek) : real_seek();
  if (result < 0) return -1;
  *offset = result;
  return 0;
}

int close_descriptor(int fd) {
  if (fd < 0) return 0;
  if (g_files.lookup(fd)) return close_tracked(fd);
  return real_close(fd);
}

int cookie_close(void* cookie) {
  auto* c = static_cast<StreamCookie*>(cookie);
  unregister_cookie(c);
  int fd = c->fd;
  std::free(c);
  return close_descriptor(fd);
}

constexpr cookie_io_functions_t kCookieFunctions = {cookie_read, cookie_write, cookie_seek, cookie_close};

// glibc's stream direction bits (libio.h; part of the FILE ABI, public in <libio.h> until 2.27).
constexpr int kNoReads = 0x0004;
constexpr int kNoWrites = 0x0008;
constexpr int kIsAppending = 0x1000;

int direction_bits(const FopenMode& mode) {
  int bits = mode.kind == 'r' ? kNoWrites : mode.kind == 'w' ? kNoReads : kNoReads | kIsAppending;
  return mode.plus ? bits & kIsAppending : bits;
}

// fopen and fdopen of "a" start at the end of file (ftell says so); fopencookie does not seek.
void start_at_end_if_appending(FILE* stream, const FopenMode& mode) {
  if (mode.kind == 'a' && !mode.plus) fseeko64(stream, 0, SEEK_END);
}

}  // namespace

FILE* open_cookie_stream(int fd, const FopenMode& mode) {
  auto* c = static_cast<StreamCookie*>(std::malloc(sizeof(StreamCookie)));
  if (!c) {
    errno = ENOMEM;
    return nullptr;
  }
  c->fd = fd;
  c->after_seek_set = false;
  c->stream = fopencookie(c, cookie_stream_mode(mode), kCookieFunctions);
  if (!c->stream) {
    keep_errno([&](int) { std::free(c); });
    return nullptr;
  }
  // glibc marks cookie streams with _fileno -2 ("open, but no descriptor"); any value but -1 keeps
  // that meaning, and the real descriptor makes fileno() answer it.
  c->stream->_fileno = fd;
  register_cookie(c);
  start_at_end_if_appending(c->stream, mode);
  return c->stream;
}

bool is_cookie_stream(FILE* stream) {
  return cookie_of(stream) != nullptr;
}

int cookie_stream_fd(FILE* stream) {
  StreamCookie* c = cookie_of(stream);
  return c ? c->fd : -1;
}

StreamCookie* detach_cookie_stream(FILE* stream) {
  StreamCookie* c = cookie_of(stream);
  if (!c) return nullptr;
  flockfile(stream);
  fflush(stream);
  __fpurge(stream);
  unregister_cookie(c);
  int fd = c->fd;
  c->fd = -1;
  stream->_fileno = -2;
  funlockfile(stream);
  keep_errno([&](int) { close_descriptor(fd); });
  return c;
}

FILE* attach_cookie_stream(StreamCookie* c, int fd, const FopenMode& mode) {
  if (fd < 0) return nullptr;
  FILE* stream = c->stream;
  flockfile(stream);
  c->fd = fd;
  stream->_fileno = fd;
  stream->_flags = (stream->_flags & ~(kNoReads | kNoWrites | kIsAppending)) | direction_bits(mode);
  clearerr_unlocked(stream);
  register_cookie(c);
  funlockfile(stream);
  start_at_end_if_appending(stream, mode);
  return stream;
}

}  // namespace appendguard
