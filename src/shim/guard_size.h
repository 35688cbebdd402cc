// Changing a guarded file's size: ftruncate, fallocate and posix_fallocate on a descriptor, truncate on
// a path. Allowed when the size stays as it is; a growing preallocation can be deferred
// (APPENDGUARD_PREALLOC=defer, deferred_prealloc.cpp): zeros appended at the last close.
#pragma once

#include <errno.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/eof_rule.h"
#include "core/file_table.h"
#include "core/unguarded_failure.h"
#include "shim/held_file.h"
#include "shim/held_sessions.h"
#include "shim/mount_guard.h"
#include "shim/spool.h"
#include "shim/trace.h"
#include "shim/violation.h"

namespace appendguard {

// ftruncate/fallocate on a tracked fd: allowed when it leaves the size as it is.
struct Resize {
  off64_t offset = 0;          // fallocate's offset; 0 for truncation
  off64_t length = 0;          // the new size (truncate) or the range length (fallocate)
  int fallocate_mode = -1;     // -1: a truncation
  bool returns_error = false;  // posix_fallocate: returns an errno value instead of -1

  static Resize truncation(off64_t length) { return {.length = length}; }
  static Resize allocation(off64_t offset, off64_t length, int mode, bool returns_error) {
    return {.offset = offset, .length = length, .fallocate_mode = mode, .returns_error = returns_error};
  }
};

inline bool resize_is_noop(const Resize& r, uint64_t end) {
  return r.fallocate_mode < 0 ? truncate_is_noop(end, r.length)
                              : fallocate_is_noop(end, r.fallocate_mode, r.offset, r.length);
}

inline uint64_t end_after_resize(const Resize& r, uint64_t end) {
  if (r.fallocate_mode < 0) return static_cast<uint64_t>(r.length);
  if (r.fallocate_mode & FALLOC_FL_KEEP_SIZE) return end;
  uint64_t range_end = static_cast<uint64_t>(r.offset) + static_cast<uint64_t>(r.length);
  return range_end > end ? range_end : end;
}

// Enforce mode, APPENDGUARD_PREALLOC=defer: a resize that only grows the file or reserves space is not
// sent; the promised size is filled with zeros at the last close (fill_reservation_before_close).
// Returns true if it was deferred.
bool defer_resize_if_possible(const char* operation, int fd, Description* d, const Resize& resize);
// A deferred resize to `size` past RLIMIT_FSIZE: the kernel's answer to the resize it would have been, now
// rather than at the close's fill (SIGXFSZ to the thread, then EFBIG: true with errno set).
bool refuse_past_file_size_limit(uint64_t size);

// Why a truncation to 0 the library passed on, by descriptor or by name, is reported when the store refused
// it.
inline constexpr const char* kEmptiedButRefused =
    "empties a file (truncation to 0, which the library passes on as it does an O_TRUNC open); the mount "
    "refused it";

// A truncation to 0 passed on (guarded_resize): the file's end is 0 if the store took it; a store's
// refusal is reported (once per call) with the errno the program gets.
template <typename Perform>
APPENDGUARD_SLOW_PATH int empty_by_truncation(const char* operation, int fd, Description* d, uint64_t end,
                                              Perform&& perform) {
  int result = perform();
  int error = errno;
  if (result == 0) {
    if (HeldFile file(fd, d); file) file->end_of_file = 0;
  } else if (is_store_refusal(error)) {
    Violation v = violation_on(operation, fd, d, end, kEmptiedButRefused).with_offset(0);
    raise_violation(v, ViolationKind::kObserved, error);
  }
  if (tracing()) trace(operation, fd, d->path, result, error, "offset=0 length=0 (emptied)");
  errno = error;
  return result;
}

// The resize sent as asked; the tracked end follows it when it succeeds.
template <typename Perform>
APPENDGUARD_SLOW_PATH int passed_on_resize(const char* operation, int fd, Description* d,
                                           const Resize& resize, uint64_t end, Perform&& perform) {
  int result = perform();
  int error = resize.returns_error ? result : errno;
  if (result == 0) {
    if (HeldFile file(fd, d); file) file->end_of_file = end_after_resize(resize, file->end_of_file);
  }
  if (tracing()) {
    trace(operation, fd, d->path, result == 0 ? 0 : -1, error, "offset=%lld length=%lld (end was %llu)",
          static_cast<long long>(resize.offset), static_cast<long long>(resize.length),
          static_cast<unsigned long long>(end));
  }
  if (!resize.returns_error) errno = error;
  return result;
}

template <typename Perform>
APPENDGUARD_SLOW_PATH int guarded_resize(const char* operation, int fd, Description* d, const Resize& resize,
                                         Perform&& perform) {
  // The kernel's own EINVAL for negative sizes and offsets, whatever the mount.
  if (resize.offset < 0 || resize.length < 0) return perform();
  uint64_t end = 0;
  uint64_t reserved = 0;
  {
    HeldFile file(fd, d);
    if (!file) return perform();
    end = file->end_of_file;
    reserved = file->reserved_size;
  }
  const bool enforce = g_config->mode == Mode::kEnforce;
  // A descriptor served by a store's read-write cache (rclone --vfs-cache-mode minimal, an O_RDWR or
  // O_APPEND open of a file no pattern names): the store grows, shrinks, empties and preallocates it by
  // itself, as a local disk does, so the call is passed on rather than deferred or refused (a deferred grow
  // left the store's file short: an in-file copy_file_range then copied nothing, a mapped read raised
  // SIGBUS).
  // A shrink to a size above 0 is the exception: rclone minimal drops it silently, so it is refused below.
  const uint64_t resized_end = end_after_resize(resize, end);
  const bool shrinks_to_a_tail = resized_end < end && resized_end > 0;
  if (enforce && d->site.writes_in_place && !shrinks_to_a_tail) {
    return passed_on_resize(operation, fd, d, resize, end, perform);
  }
  // A spooled file (shim/spool.h) whose reservation does not fit in the spool: ENOSPC, with one line.
  if (enforce && any_spooled() && !spool_room_for(fd, d, end_after_resize(resize, end))) {
    if (resize.returns_error) return ENOSPC;
    errno = ENOSPC;
    return -1;
  }
  if (enforce && g_config->prealloc == Prealloc::kDefer) {
    const uint64_t size = end_after_resize(resize, end);
    if (size > (reserved > end ? reserved : end) && refuse_past_file_size_limit(size))
      return resize.returns_error ? EFBIG : -1;
    if (defer_resize_if_possible(operation, fd, d, resize)) return 0;
  }
  const bool is_noop = reserved <= end && resize_is_noop(resize, end);
  if (is_noop && enforce) {
    // The size stays as it is: nothing to ask of a mount that refuses resizing.
    if (tracing()) {
      trace(operation, fd, d->path, 0, 0, "offset=%lld length=%lld (size unchanged: not sent)",
            static_cast<long long>(resize.offset), static_cast<long long>(resize.length));
    }
    return 0;
  }
  // A truncation to 0 empties the file, as an O_TRUNC open does, which the library lets through: what
  // is written next lands at the new end (`truncate -s 0`, `split` over an old part, Python's
  // truncate(0): on HDFS they work without the library). Passed on where the store's session is the
  // program's own: not a write-once store (there the open wrote the file anew, or holds its session, and
  // rclone --vfs-cache-mode off fails a truncation after writes, dropping the upload), nor over a
  // deferred preallocation. A store's refusal is reported as it came.
  if (enforce && !is_noop && resize.fallocate_mode < 0 && resize.length == 0 && reserved <= end &&
      store_kind_of(d->path) != StoreKind::kWriteOnce)
    return empty_by_truncation(operation, fd, d, end, perform);
  if (!is_noop) {
    const bool allocates = resize.fallocate_mode >= 0;
    const bool deferrable =
        defer_resize(end, reserved, resize.fallocate_mode, resize.offset, resize.length).deferrable;
    const char* why = allocates
                          ? "preallocates or punches a file on an append-only mount, which refuses fallocate"
                          : "changes the size of a file on an append-only mount, which refuses truncation";
    if (deferrable && !enforce) {
      why = allocates ? "preallocates a file on an append-only mount, which refuses fallocate (enforce mode "
                        "defers it: zeros are appended at close if the program writes less)"
                      : "grows a file with truncate on an append-only mount, which refuses truncation "
                        "(enforce mode defers it: zeros are appended at close if the program writes less)";
    }
    Violation v =
        violation_on(operation, fd, d, end, why).with_offset(allocates ? resize.offset : resize.length);
    if (allocates) v.with_count(static_cast<uint64_t>(resize.length));
    v.fixed_by_enforce = deferrable && !enforce;
    if (!raise_violation(v)) {
      // A writer in place whose shrink was refused would leave a file with a stale tail (`dd seek=N`
      // without conv=notrunc): its writes below the end are refused from now on.
      if (d->site.writes_in_place) {
        if (HeldFile file(fd, d); file) d->site.writes_in_place = false;
      }
      return resize.returns_error ? errno : -1;
    }
  }
  return passed_on_resize(operation, fd, d, resize, end, perform);
}

// Whether every descriptor this process has on the file is served by the store's read-write cache
// (Description::site.writes_in_place): the store then empties the file by name as well, with no upload of
// ours to drop.
inline bool only_cached_descriptors(dev_t device, ino_t inode) {
  int fds[16];
  size_t count = g_files.descriptors_of_file(device, inode, fds, 16);
  if (count == 0 || count > 16) return false;
  for (size_t i = 0; i < count; i++) {
    Description* d = g_files.lookup(fds[i]);
    if (!d || !d->site.writes_in_place) return false;
  }
  return true;
}

template <typename Perform>
APPENDGUARD_SLOW_PATH int guarded_truncate(const char* operation, const char* full_path, off64_t length,
                                           Perform&& perform) {
  struct stat64 st;
  if (stat64(full_path, &st) != 0) return perform();  // let the kernel give its answer
  uint64_t end = static_cast<uint64_t>(st.st_size);
  g_files.end_of_file_of(st.st_dev, st.st_ino, end);  // an open file may know more than stat says
  bool is_noop = truncate_is_noop(end, length);
  if (is_noop && g_config->mode == Mode::kEnforce) {
    if (tracing())
      trace(operation, -1, full_path, 0, 0, "length=%lld (no change: not sent)",
            static_cast<long long>(length));
    return 0;
  }
  // Emptied by name (`truncate(p, 0)`), as by an O_TRUNC open: passed on, except on a write-once store
  // while a descriptor of this process writes the file (written anew at its open, or a session: the
  // store would drop the upload) other than one the store's cache serves; a session held after the
  // program's close is committed first. A store's refusal is reported as it came.
  const bool empties =
      !is_noop && length == 0 && g_config->mode == Mode::kEnforce &&
      (store_kind_of(full_path) != StoreKind::kWriteOnce || !g_files.tracks_file(st.st_dev, st.st_ino) ||
       only_cached_descriptors(st.st_dev, st.st_ino));
  if (empties && any_held_sessions()) commit_held_file(st.st_dev, st.st_ino, "before its truncation to 0");
  if (!is_noop && !empties) {
    Violation v =
        violation_at_path(operation, full_path, end,
                          "truncates a file on an append-only mount, which refuses changing the size")
            .with_offset(length);
    if (!raise_violation(v)) return -1;
  }
  int result = perform();
  if (result == 0) g_files.set_end_of_file(st.st_dev, st.st_ino, static_cast<uint64_t>(length));
  int error = errno;
  if (result != 0 && empties && is_store_refusal(error)) {
    Violation v = violation_at_path(operation, full_path, end, kEmptiedButRefused).with_offset(0);
    raise_violation(v, ViolationKind::kObserved, error);
  }
  if (tracing())
    trace(operation, -1, full_path, result, error, "length=%lld", static_cast<long long>(length));
  errno = error;
  return result;
}

// Deferred preallocation (deferred_prealloc.cpp): before the last descriptor of a file closes, and at
// exit, append the zeros the program was promised and did not write.
void fill_deferred_reservation_before_close(int fd, Description* d);
inline void fill_reservation_before_close(int fd, Description* d) {
  // A file on which no resize was deferred has nothing to fill: most closes stop at this one load.
  if (d->file && d->file->resize_deferred.load(std::memory_order_relaxed))
    fill_deferred_reservation_before_close(fd, d);
}
void fill_reservations_at_exit();
// `size` (from the kernel), or the promised size of a deferred preallocation if larger.
off64_t size_seen_by_program(int fd, off64_t size);

}  // namespace appendguard
