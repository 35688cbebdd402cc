// Deferred preallocation (APPENDGUARD_PREALLOC=defer): safetensors 0.8 and other writers grow a new file
// with ftruncate or fallocate before writing it from the start; append-only mounts refuse that. The
// promise is kept instead: the size is recorded, the program's writes go on as appends, and whatever the
// program did not write is filled with zeros when the file's last descriptor here closes (or at exit),
// so the file ends as an ordinary disk would leave it.
#include <linux/magic.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>

#include "core/write_all.h"
#include "shim/guard_size.h"
#include "shim/mount_guard.h"
#include "shim/real_io.h"
#include "shim/trace.h"

namespace appendguard {
namespace {

// Appends `count` zeros at `end`; returns how many landed.
uint64_t append_zeros(int fd, const Description* d, uint64_t end, uint64_t count, int& error) {
  static const char kZeros[4096] = {};
  WriteAllResult result = write_all(count, [&](uint64_t done, uint64_t left) {
    size_t chunk = left < sizeof kZeros ? static_cast<size_t>(left) : sizeof kZeros;
    return d->kernel_appends ? real_write(fd, kZeros, chunk)
                             : real_pwrite64(fd, kZeros, chunk, static_cast<off64_t>(end + done));
  });
  error = result.error_or_eio();
  return result.written;
}

// Out of line: its message buffer would otherwise sit in the frame of every guarded file's last close
// (issue 24, item 6: a small thread stack).
[[gnu::noinline]] void report_short_fill(const Description* d, const char* when, uint64_t end,
                                         uint64_t missing, uint64_t written, int error) {
  char message[kMaxPath + 300];
  std::snprintf(message, sizeof message,
                "%s: %s, appending the %llu zero bytes that complete its deferred preallocation to %llu "
                "bytes failed after %llu (%s): the file is shorter than the program made it",
                d->path, when, static_cast<unsigned long long>(missing),
                static_cast<unsigned long long>(end) + missing, static_cast<unsigned long long>(written),
                errno_name(error));
  report_notice(message);
}

void fill(int fd, Description* d, const char* when) {
  HeldFile file(fd, d);
  if (!file || file->reserved_size <= file->end_of_file || file->reserved_by != raw_getpid()) return;
  uint64_t end = file->end_of_file;
  uint64_t missing = file->reserved_size - end;
  int error = 0;
  uint64_t written;
  {
    InternalScope internal;
    written = append_zeros(fd, d, end, missing, error);
  }
  file->end_of_file = end + written;
  file->reserved_size = 0;
  file.release();
  if (written != missing) report_short_fill(d, when, end, missing, written, error);
  if (tracing()) {
    trace("prealloc-fill", fd, d->path, static_cast<long long>(written), error, "zeros=%llu at=%llu (%s)",
          static_cast<unsigned long long>(missing), static_cast<unsigned long long>(end), when);
  }
}

// Issue 24, item 7: a deferred size is invisible to the process's other descriptors (a second O_RDONLY
// descriptor saw 10 bytes of a file grown to 8192, its pread at 5000 read nothing, a MAP_SHARED mapping
// read there raised SIGBUS). Where the kernel can grow the file without changing where the program's
// writes land, it is grown now as well, so that every descriptor, mapping and stat sees the promised
// size with zeros: a descriptor whose writes the kernel places at its own offset (not O_APPEND), on a
// filesystem that is not FUSE (a store may refuse the resize, or take it as part of its upload) nor on a
// mount guarded whole. The file's tracked end stays where the program's bytes end, so its writes go on
// there; the fill at the last close writes the zeros the file already reads as. Elsewhere (a store, or a
// descriptor we made O_APPEND) the other descriptors see the short size until the fill (docs/limits.md).
void grow_for_other_descriptors(int fd, const Description* d, uint64_t size) {
  if (d->kernel_appends || append_only_mount_of(d->path)) return;
  struct statfs fs;
  if (syscall(SYS_fstatfs, fd, &fs) != 0 || fs.f_type == FUSE_SUPER_MAGIC) return;
  struct stat64 st;
  if (real_fstat64(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) >= size) return;
  InternalScope internal;
  real_ftruncate64(fd, static_cast<off64_t>(size));
}

}  // namespace

bool defer_resize_if_possible(const char* operation, int fd, Description* d, const Resize& resize) {
  uint64_t before = 0;
  uint64_t after = 0;
  {
    HeldFile file(fd, d);
    if (!file) return false;
    uint64_t end = file->end_of_file;
    DeferredResize r =
        defer_resize(end, file->reserved_size, resize.fallocate_mode, resize.offset, resize.length);
    if (!r.deferrable) return false;
    before = file->reserved_size > end ? file->reserved_size : end;
    after = r.logical_size;
    file->reserved_size = after > end ? after : 0;
    file->reserved_by = raw_getpid();
    if (file->reserved_size != 0) file->resize_deferred.store(true, std::memory_order_relaxed);
  }
  if (after > before) grow_for_other_descriptors(fd, d, after);
  if (tracing()) {
    trace(operation, fd, d->path, 0, 0, "offset=%lld length=%lld size=%llu->%llu (deferred: not sent)",
          static_cast<long long>(resize.offset), static_cast<long long>(resize.length),
          static_cast<unsigned long long>(before), static_cast<unsigned long long>(after));
  }
  return true;
}

bool refuse_past_file_size_limit(uint64_t size) {
  struct rlimit limit;
  if (real_syscall(SYS_prlimit64, 0, RLIMIT_FSIZE, nullptr, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY ||
      size <= limit.rlim_cur)
    return false;
  real_syscall(SYS_tgkill, raw_getpid(), real_syscall(SYS_gettid), SIGXFSZ);
  errno = EFBIG;
  return true;
}

off64_t size_seen_by_program(int fd, off64_t size) {
  Description* d = g_files.lookup(fd);
  if (!d) return size;
  HeldFile file(fd, d);
  if (!file || file->reserved_size <= static_cast<uint64_t>(size)) return size;
  return static_cast<off64_t>(file->reserved_size);
}

void fill_deferred_reservation_before_close(int fd, Description* d) {
  if (!owns_file_table() || !g_files.is_last_descriptor_of_file(fd)) return;
  fill(fd, d, "at its last close");
}

void fill_reservations_at_exit() {
  if (!owns_file_table()) return;
  int highest = g_files.highest_fd();
  for (int fd = g_files.next_slot(0, highest); fd <= highest; fd = g_files.next_slot(fd + 1, highest)) {
    Description* d = g_files.lookup(fd);
    if (d && d->file) fill(fd, d, "at exit");
  }
}

}  // namespace appendguard
