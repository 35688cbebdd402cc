// Seeking on a guarded descriptor: the position the program believes in. In enforce mode on an O_APPEND
// descriptor the kernel's offset means nothing, so the position is ours alone; elsewhere the kernel's.
#pragma once

#include <errno.h>
#include <sys/types.h>

#include "core/eof_rule.h"
#include "core/file_table.h"
#include "shim/held_file.h"
#include "shim/real_io.h"
#include "shim/trace.h"

namespace appendguard {

// A seek that left the end of file (SeekSiteAction::kRecord) records its site for the report of a later
// write there; one onto the end (kForget) forgets it. Out of line: most seeks do neither.
void note_seek_site(SeekSiteAction action, const char* operation, Description* d, off64_t offset, int whence,
                    uint64_t position, uint64_t end_of_file);

template <typename RealSeek>
APPENDGUARD_SLOW_PATH off64_t guarded_seek(const char* operation, int fd, Description* d, off64_t offset,
                                           int whence, RealSeek&& real_seek) {
  HeldFile file(fd, d);
  if (!file) return file.stale() ? fail_on_closed_descriptor() : real_seek();
  off64_t result;
  int error = errno;  // left as it was when the seek succeeds
  const uint64_t before = d->position;
  // A deferred preallocation makes the file look as large as promised.
  uint64_t size = file->reserved_size > file->end_of_file ? file->reserved_size : file->end_of_file;
  if (g_config->mode == Mode::kEnforce && d->kernel_appends) {
    // We own the position: the kernel appends whatever its own offset says.
    SeekResult seek = compute_seek(d->position, size, offset, whence);
    result = seek.offset;
    if (result < 0) error = seek.error;
    if (result >= 0) d->position = static_cast<uint64_t>(result);
    // A descriptor the kernel also reads (an O_RDWR|O_APPEND one kept as asked: rclone minimal's cache,
    // an inherited one): its reads start at the kernel offset, which follows.
    if (result >= 0 && (d->site.effective_flags & O_ACCMODE) == O_RDWR) real_lseek64(fd, result, SEEK_SET);
  } else {
    if (whence == SEEK_END && size > file->end_of_file) {
      result = real_lseek64(fd, static_cast<off64_t>(size) + offset, SEEK_SET);
    } else {
      result = real_seek();
    }
    error = errno;
    if (result >= 0) d->position = static_cast<uint64_t>(result);
  }
  uint64_t end = file->end_of_file;
  SeekSiteAction site =
      result < 0 ? SeekSiteAction::kNone
                 : seek_site_action(before, static_cast<uint64_t>(result), end, d->seek_site_recorded());
  file.release();
  if (__builtin_expect(site != SeekSiteAction::kNone, 0))
    note_seek_site(site, operation, d, offset, whence, static_cast<uint64_t>(result), end);
  if (tracing()) {
    trace_numbers(
        operation, fd, d->path, result, error,
        {trace_signed("offset", offset), trace_signed("whence", whence), trace_unsigned("end_of_file", end)});
  }
  errno = error;
  return result;
}

}  // namespace appendguard
