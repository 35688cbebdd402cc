#include "core/eof_rule.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <cerrno>
#include <limits>

namespace appendguard {

SeekResult compute_seek(uint64_t position, uint64_t end_of_file, off64_t offset, int whence) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<off64_t>::max());
  auto from = [&](uint64_t base) -> SeekResult {
    if (offset < 0 && static_cast<uint64_t>(-(offset + 1)) + 1 > base) return {-1, EINVAL};
    if (offset > 0 && static_cast<uint64_t>(offset) > kMax - base) return {-1, EOVERFLOW};
    return {static_cast<off64_t>(base + offset), 0};
  };
  switch (whence) {
    case SEEK_SET:
      if (offset < 0) return {-1, EINVAL};
      return {offset, 0};
    case SEEK_CUR:
      return from(position);
    case SEEK_END:
      return from(end_of_file);
    case SEEK_DATA:
      if (offset < 0) return {-1, EINVAL};
      if (static_cast<uint64_t>(offset) >= end_of_file) return {-1, ENXIO};
      return {offset, 0};
    case SEEK_HOLE:
      if (offset < 0) return {-1, EINVAL};
      if (static_cast<uint64_t>(offset) >= end_of_file) return {-1, ENXIO};
      return {static_cast<off64_t>(end_of_file), 0};
    default:
      return {-1, EINVAL};
  }
}

bool truncate_is_noop(uint64_t end_of_file, off64_t length) {
  return length >= 0 && static_cast<uint64_t>(length) == end_of_file;
}

bool fallocate_is_noop(uint64_t end_of_file, int mode, off64_t offset, off64_t length) {
  if (offset < 0 || length <= 0) return false;  // libc/kernel answer EINVAL
  if (mode == FALLOC_FL_KEEP_SIZE) return true;
  return mode == 0 && static_cast<uint64_t>(offset) + static_cast<uint64_t>(length) <= end_of_file;
}

DeferredResize defer_resize(uint64_t end_of_file, uint64_t logical_size, int fallocate_mode, off64_t offset,
                            off64_t length) {
  DeferredResize r;
  if (logical_size < end_of_file) logical_size = end_of_file;
  if (fallocate_mode < 0) {
    if (length < 0 || static_cast<uint64_t>(length) < end_of_file) return r;  // EINVAL, or cuts written bytes
    r.deferrable = true;
    r.logical_size = static_cast<uint64_t>(length);
    return r;
  }
  if (offset < 0 || length <= 0) return r;  // libc and the kernel answer EINVAL
  if (fallocate_mode == FALLOC_FL_KEEP_SIZE) {
    r.deferrable = true;
    r.logical_size = logical_size;
  } else if (fallocate_mode == 0) {
    uint64_t range_end = static_cast<uint64_t>(offset) + static_cast<uint64_t>(length);
    r.deferrable = true;
    r.logical_size = range_end > logical_size ? range_end : logical_size;
  }
  return r;
}

}  // namespace appendguard
