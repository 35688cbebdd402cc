// The one write-everything loop: short writes are continued, EINTR is retried, and the result says how
// much was written and why it stopped. Every caller (the rewrite's write-back, copies into an O_APPEND
// descriptor, deferred zeros, dprintf, the log, appendonlyfs) supplies only its call.
#pragma once

#include <errno.h>
#include <sys/types.h>

#include <cstdint>

namespace appendguard {

struct WriteAllResult {
  uint64_t written = 0;
  int error = 0;          // the errno of the call that failed; 0 if one wrote nothing
  bool complete = false;  // all bytes were written

  // 0 when complete, else the error, with EIO for a call that wrote nothing.
  int error_or_eio() const { return complete ? 0 : error != 0 ? error : EIO; }
  // For callers with write(2)'s convention: the bytes written if any, else -1 (errno = error) or 0.
  ssize_t as_write_result() const {
    if (written > 0 || error == 0) return static_cast<ssize_t>(written);
    errno = error;
    return -1;
  }
};

// Calls `write_some(done, left)`, which writes up to `left` bytes of what follows the first `done` and
// returns like write(2), until `size` bytes are written or a call fails or writes nothing.
template <typename WriteSome>
WriteAllResult write_all(uint64_t size, WriteSome&& write_some) {
  WriteAllResult result;
  while (result.written < size) {
    ssize_t n = write_some(result.written, size - result.written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      result.error = n < 0 ? errno : 0;
      return result;
    }
    result.written += static_cast<uint64_t>(n);
  }
  result.complete = true;
  return result;
}

}  // namespace appendguard
