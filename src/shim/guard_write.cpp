#include "shim/guard_write.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cstring>
#include <string_view>

#include "core/write_all.h"
#include "shim/guard_descriptor.h"
#include "shim/violation.h"

namespace appendguard {
namespace {

const char* write_violation_reason(WriteVerdict verdict, bool has_offset, bool lands_elsewhere) {
  if (verdict == WriteVerdict::kNoAppendFlag) {
    return "RWF_NOAPPEND writes in place, bypassing O_APPEND; an append-only mount refuses it";
  }
  if (verdict == WriteVerdict::kAfterFailedRead) {
    return "a read of this descriptor failed (the program opened the file read-write; appendguard made the "
           "handle write-only for the append-only mount): what the program writes now may rest on what it "
           "could not read (Python's zipfile in mode \"a\" takes the archive for none and appends another), "
           "so its writes are refused and the file keeps its bytes";
  }
  if (lands_elsewhere) {
    return "the program means the end of file (it asked for O_APPEND), but the descriptor appendguard "
           "opened does not append (a file written anew or a held write session) and the kernel would "
           "put the bytes at the offset given, not at the end";
  }
  return has_offset
             ? "the explicit offset is not the end of file; an append-only mount accepts only appends"
             : "the position is not the end of file (the program seeked away from the end); an append-only "
               "mount accepts only appends";
}

}  // namespace

void note_first_bytes(Description* d, const void* bytes, size_t count) {
  // The cheap tests first; the length kept by FileTable::set_path: the path is not measured on every
  // file's first write.
  constexpr std::string_view kSuffix = ".safetensors";
  if (count < 8 || d->path_length < kSuffix.size() || d->file->end_of_file != 0 ||
      std::memcmp(d->path + d->path_length - kSuffix.size(), kSuffix.data(), kSuffix.size()) != 0)
    return;
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes, sizeof header_length);  // x86-64: little-endian, as the format
  if (header_length == 0 || header_length > 100'000'000) return;
  d->file->safetensors_header_end.store(8 + header_length, std::memory_order_relaxed);
}

bool refresh_shared_offset(int fd, Description* d) {
  off64_t offset = real_lseek64(fd, 0, SEEK_CUR);
  // The other process appended through the shared description: the offset is past the end we knew. Not
  // fstat's size, which rclone --vfs-cache-mode off keeps reporting from before an O_TRUNC for seconds
  // (a "wb" file, a fork, then every write refused and the file committed empty: issue 23).
  if (offset > 0 && static_cast<uint64_t>(offset) > d->file->end_of_file)
    d->file->end_of_file = static_cast<uint64_t>(offset);
  if (offset < 0 || static_cast<uint64_t>(offset) == d->position) return false;
  d->position = static_cast<uint64_t>(offset);
  return true;
}

bool move_to_end_for_append(int fd, Description* d, bool has_offset, uint64_t intended_offset,
                            uint64_t end_of_file) {
  if (has_offset || !d->program_appends || d->kernel_appends || intended_offset != end_of_file ||
      d->position == end_of_file)
    return false;
  int error = errno;
  off64_t moved = real_lseek64(fd, static_cast<off64_t>(end_of_file), SEEK_SET);
  errno = error;
  if (moved < 0 || static_cast<uint64_t>(moved) != end_of_file) return false;
  d->position = end_of_file;
  return true;
}

bool refuse_or_report_write(const char* operation, int fd, Description* d, const RefusedWrite& write) {
  const bool moved_at_position = write.moved_by_another_process && !write.has_offset;
  const char* why = moved_at_position
                        ? "the descriptor's offset, shared with another process (a fork, an inherited or a "
                          "received descriptor), was moved away from the end of file there; an append-only "
                          "mount accepts only appends"
                        : write_violation_reason(write.verdict, write.has_offset,
                                                 write.intended_offset == write.end_of_file);
  Violation v = violation_on(operation, fd, d, write.end_of_file, why)
                    .with_count(write.count)
                    .with_offset(static_cast<int64_t>(write.intended_offset));
  v.landing_offset = write.landing_offset;
  // At the position: where a seek of this process moved it away from the end, if one did.
  if (write.verdict == WriteVerdict::kNotAtEnd && !write.has_offset && !write.moved_by_another_process)
    v.left_end_at = d->seek_site();
  if (raise_violation(v)) return true;
  int error = errno;
  if (tracing()) {
    trace_numbers(operation, fd, d->path, -1, error,
                  {trace_unsigned("bytes", write.count), trace_unsigned("offset", write.intended_offset),
                   trace_unsigned("end_of_file", write.end_of_file)},
                  " (refused)");
  }
  errno = error;
  return false;
}

void trace_write(const char* operation, int fd, const Description* d, uint64_t count,
                 uint64_t intended_offset, uint64_t end_of_file, ssize_t result) {
  int error = errno;
  trace_numbers(operation, fd, d->path, result, error,
                {trace_unsigned("bytes", count), trace_unsigned("offset", intended_offset),
                 trace_unsigned("end_of_file", end_of_file)});
  errno = error;
}

ssize_t refuse_write_from_interrupting_handler(const char* operation, int fd, Description* d,
                                               uint64_t count) {
  Violation v =
      violation_on(operation, fd, d, d->file->end_of_file,
                   "a signal handler writes to the file whose write it interrupted; the interrupted "
                   "write has not recorded its bytes yet, so this one cannot be placed at the end")
          .with_count(count);
  raise_violation(v, ViolationKind::kUnplaceable);
  return -1;
}

// ---------------------------------------------------------------- copies

void note_copy_input(const char* operation, int in_fd, bool moves_position, ssize_t result) {
  int error = errno;
  Description* d = g_files.lookup(in_fd);
  if (d && g_files.pin(d)) {
    note_read(operation, in_fd, d, moves_position, result, error);
    g_files.unpin(d);
  }
  errno = error;
}

ssize_t copy_by_write(int in_fd, off64_t* in_offset, int out_fd, off64_t* out_offset, size_t count) {
  if (count == 0) return 0;
  constexpr size_t kChunk = size_t{1} << 20;
  size_t chunk = count < kChunk ? count : kChunk;
  char* buffer = static_cast<char*>(std::malloc(chunk));
  if (!buffer) {
    errno = ENOMEM;
    return -1;
  }
  size_t total = 0;
  int error = 0;
  while (total < count) {
    size_t want = count - total < chunk ? count - total : chunk;
    ssize_t got = in_offset ? real_pread64(in_fd, buffer, want, *in_offset) : real_read(in_fd, buffer, want);
    if (got < 0 && errno == EINTR && total == 0) continue;
    if (got <= 0) {
      error = got < 0 ? errno : 0;
      break;
    }
    WriteAllResult out = write_all(static_cast<uint64_t>(got), [&](uint64_t done, uint64_t left) {
      return out_offset ? real_pwrite64(out_fd, buffer + done, left, *out_offset + static_cast<off64_t>(done))
                        : real_write(out_fd, buffer + done, left);
    });
    size_t done = static_cast<size_t>(out.written);
    if (out_offset) *out_offset += static_cast<off64_t>(done);
    if (!out.complete) error = out.error_or_eio();
    total += done;
    if (in_offset) {
      *in_offset += static_cast<off64_t>(done);
    } else if (done < static_cast<size_t>(got)) {
      // Give back what was read but not written. A pipe cannot take it back (see docs/reference.md).
      real_lseek64(in_fd, -static_cast<off64_t>(got - static_cast<ssize_t>(done)), SEEK_CUR);
    }
    if (error) break;
  }
  std::free(buffer);
  if (total == 0 && error) {
    errno = error;
    return -1;
  }
  return static_cast<ssize_t>(total);
}

}  // namespace appendguard
