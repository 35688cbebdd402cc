// Template bodies of guard.h: the hooks instantiate them with the real libc call as `perform`.
#pragma once

#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core/open_flags.h"
#include "report/summary.h"
#include "shim/real_io.h"

namespace appendguard {

// The largest file APPENDGUARD_REOPEN=rewrite (and the hold mode's fallback for files another process
// wrote) writes anew. From the truncating open to the end of the write-back a SIGKILL leaves the file
// truncated (the kernel's close commits what was written back): measured with 10 kills at random moments,
// 16 MiB files came out shorter 1 time on rclone --vfs-cache-mode off and 2 times on appendonlyfs s3,
// 64 MiB 5 and 4 times. Above this size the open is refused (EFBIG) with a report.
constexpr uint64_t kMaxRewriteBytes = uint64_t{8} << 20;

// Reads all of `fd` (`size` bytes) into a new buffer; null with errno on failure.
char* read_whole_file(int fd, uint64_t size);
// Writes all of `data` to `fd`, retrying short writes and EINTR. Returns the bytes written.
uint64_t write_fully(int fd, const char* data, uint64_t size, int& error);
void report_rewrite_failure(const OpenDecision& decision, uint64_t written, uint64_t size, int error);

// APPENDGUARD_REOPEN=rewrite, for stores that cannot append to an existing file but replace it
// atomically when it is closed (mountpoint-s3): read what the file holds, open it truncating, write the
// bytes back, and leave the position at 0 as the program expects. A missing file is opened with the
// truncating flags (O_CREAT creates it; without O_CREAT the program gets its ENOENT).
template <typename Call>
int reopen_by_rewriting(OpenDecision& decision, Call&& call) {
  decision.flags = rewrite_open_flags_by_truncation(decision.flags);
  int reader = call(O_RDONLY | O_CLOEXEC);
  if (reader < 0) return errno == ENOENT ? call(decision.flags) : -1;
  struct stat64 st;
  char* old_bytes = nullptr;
  uint64_t size = 0;
  int error = 0;
  bool read = real_fstat64(reader, &st) == 0;
  if (read) {
    size = static_cast<uint64_t>(st.st_size);
    if (size > kMaxRewriteBytes) {
      error = EFBIG;
    } else if (size > 0) {
      old_bytes = read_whole_file(reader, size);
      read = old_bytes != nullptr;
    }
  }
  if (!read) error = errno;
  real_close(reader);
  if (error) {
    report_rewrite_failure(decision, 0, size, error);
    errno = error;
    return -1;
  }
  int fd = call(decision.flags);
  if (fd >= 0 && size > 0) {
    uint64_t written = write_fully(fd, old_bytes, size, error);
    if (written != size) {
      report_rewrite_failure(decision, written, size, error);
      real_close(fd);
      fd = -1;
    } else {
      real_lseek64(fd, 0, SEEK_SET);
      decision.written_back = size;
    }
  } else if (fd < 0) {
    error = errno;
  }
  std::free(old_bytes);
  if (fd < 0) errno = error;
  return fd;
}

// The held descriptor answering a write open (held_sessions.h): close-on-exec as the program asked, its
// kernel offset at the end of what was written (where every allowed write lands).
int reuse_held_descriptor(const OpenRequest& request, const OpenDecision& decision);

template <typename Call>
int open_as_decided(const OpenRequest& request, OpenDecision& decision, Call&& call) {
  int fd = decision.reuse_fd >= 0      ? reuse_held_descriptor(request, decision)
           : decision.rewrite_existing ? reopen_by_rewriting(decision, call)
                                       : call(decision.flags);
  return finish_open(request, decision, fd);
}

inline const char* write_violation_reason(WriteVerdict verdict, const WriteRequest& request) {
  if (verdict == WriteVerdict::kNoAppendFlag) {
    return "RWF_NOAPPEND writes in place, bypassing O_APPEND; an append-only mount refuses it";
  }
  return request.has_offset
             ? "the explicit offset is not the end of file; an append-only mount accepts only appends"
             : "the position is not the end of file (the program seeked away from the end); an append-only "
               "mount accepts only appends";
}

// The guarded paths are kept out of line so that each hook's untracked path is a few instructions and a
// tail call, with no registers to save.
#define APPENDGUARD_SLOW_PATH __attribute__((noinline))

// A signal handler writing to the file whose guarded call it interrupted: that call holds the file's
// lock and has not recorded its own bytes yet, so this write cannot be placed. It is refused.
ssize_t refuse_write_from_interrupting_handler(const char* operation, int fd, Description* d,
                                               const WriteRequest& request);

// The parts of guarded_write that are not on the path of an allowed write.
bool refuse_or_report_write(const char* operation, int fd, Description* d, const WriteRequest& request,
                            const WriteCheck& check, uint64_t end_of_file, bool moved_by_another_process);
void trace_write(const char* operation, int fd, const Description* d, const WriteRequest& request,
                 const WriteCheck& check, uint64_t end_of_file, ssize_t result);

// A descriptor closed by another thread while this call was on its way: the close won, as it may.
inline ssize_t fail_on_closed_descriptor() {
  errno = EBADF;
  return -1;
}

// A description whose kernel offset another process may have moved (shares_offset): reads the offset
// and the size back before a write at the position, so that the check sees where the bytes would land.
// Returns true if the offset had moved. File lock held.
bool refresh_shared_offset(int fd, Description* d, PositionState& state);

template <typename Perform>
APPENDGUARD_SLOW_PATH ssize_t guarded_write(const char* operation, int fd, Description* d,
                                            const WriteRequest& request, Perform&& perform) {
  // The kernel's own EINVAL for a negative offset, whatever the mount.
  if (request.has_offset && static_cast<int64_t>(request.offset) < 0) return perform();
  HeldFile file(fd, d);
  if (__builtin_expect(!file, 0)) {
    if (file.held_by_interrupted_call())
      return refuse_write_from_interrupting_handler(operation, fd, d, request);
    return fail_on_closed_descriptor();
  }
  PositionState state = d->snapshot();
  bool moved_by_another_process =
      d->shares_offset.load(std::memory_order_relaxed) && refresh_shared_offset(fd, d, state);
  WriteCheck check = check_write(state, request, g_config->mode == Mode::kEnforce);
  if (__builtin_expect(check.verdict != WriteVerdict::kAllowed, 0)) {
    file.release();
    if (!refuse_or_report_write(operation, fd, d, request, check, state.end_of_file,
                                moved_by_another_process))
      return -1;
    file.reacquire(fd, d);
    if (!file) return fail_on_closed_descriptor();
    state = d->snapshot();
    check = check_write(state, request, false);
  }
  ssize_t result = perform();  // releasing the lock below leaves errno as the call set it
  if (result > 0) {
    apply_write(state, request, check.landing_offset, static_cast<uint64_t>(result));
    d->store(state);
    count_event(g_summary.writes);
    count_event(g_summary.bytes, static_cast<uint64_t>(result));
  }
  file.release();
  if (__builtin_expect(result < 0, 0)) note_failed_guarded_call(operation, fd, d, errno);
  if (__builtin_expect(tracing(), 0))
    trace_write(operation, fd, d, request, check, state.end_of_file, result);
  return result;
}

template <typename RealSeek>
APPENDGUARD_SLOW_PATH off64_t guarded_seek(const char* operation, int fd, Description* d, off64_t offset,
                                           int whence, RealSeek&& real_seek) {
  HeldFile file(fd, d);
  if (!file) return file.stale() ? fail_on_closed_descriptor() : real_seek();
  off64_t result;
  int error = errno;  // left as it was when the seek succeeds
  // A deferred preallocation makes the file look as large as promised.
  uint64_t size = file->reserved_size > file->end_of_file ? file->reserved_size : file->end_of_file;
  if (g_config->mode == Mode::kEnforce && d->kernel_appends) {
    // We own the position: the kernel appends whatever its own offset says.
    SeekResult seek = compute_seek(d->position, size, offset, whence);
    result = seek.offset;
    if (result < 0) error = seek.error;
    if (result >= 0) d->position = static_cast<uint64_t>(result);
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
  file.release();
  if (tracing()) {
    trace_numbers(
        operation, fd, d->path, result, error,
        {trace_signed("offset", offset), trace_signed("whence", whence), trace_unsigned("end_of_file", end)});
  }
  errno = error;
  return result;
}

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
  if (enforce && g_config->prealloc == Prealloc::kDefer && defer_resize_if_possible(operation, fd, d, resize))
    return 0;
  const bool is_noop = reserved <= end && resize_is_noop(resize, end);
  if (is_noop && enforce) {
    // The size stays as it is: nothing to ask of a mount that refuses resizing.
    if (tracing()) {
      trace(operation, fd, d->path, 0, 0, "offset=%lld length=%lld (size unchanged: not sent)",
            static_cast<long long>(resize.offset), static_cast<long long>(resize.length));
    }
    return 0;
  }
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
    Violation v = violation_on(operation, fd, d, end, why);
    v.fixed_by_enforce = deferrable && !enforce;
    v.has_count = allocates;
    v.count = static_cast<uint64_t>(resize.length);
    v.has_offset = true;
    v.offset = allocates ? resize.offset : resize.length;
    if (!handle_violation(v)) return resize.returns_error ? errno : -1;
  }
  int result = perform();
  int error = resize.returns_error ? result : errno;
  if (result == 0) {
    if (HeldFile file(fd, d); file) file->end_of_file = end_after_resize(resize, file->end_of_file);
  }
  if (tracing()) {
    trace(operation, fd, d->path, result == 0 ? 0 : -1, error, "offset=%lld length=%lld",
          static_cast<long long>(resize.offset), static_cast<long long>(resize.length));
  }
  if (!resize.returns_error) errno = error;
  return result;
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
  if (!is_noop) {
    Violation v;
    v.operation = operation;
    v.path = full_path;
    v.has_count = false;
    v.offset = length;
    v.end_of_file = end;
    v.why = "truncates a file on an append-only mount, which refuses changing the size";
    if (!handle_violation(v)) return -1;
  }
  int result = perform();
  if (result == 0) g_files.set_end_of_file(st.st_dev, st.st_ino, static_cast<uint64_t>(length));
  int error = errno;
  if (tracing())
    trace(operation, -1, full_path, result, error, "length=%lld", static_cast<long long>(length));
  errno = error;
  return result;
}

}  // namespace appendguard
