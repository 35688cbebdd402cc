// Writing to a guarded file: the end-of-file rule (core/eof_rule.h) on the position the program believes
// in, then the real call, then the description's new position and end. Seeks move that position.
#pragma once

#include <errno.h>
#include <sys/types.h>

#include "core/eof_rule.h"
#include "core/file_table.h"
#include "shim/held_file.h"
#include "shim/real_io.h"
#include "shim/store_refusal.h"
#include "shim/trace.h"

namespace appendguard {

// The kernel refuses sendfile, copy_file_range and splice into an O_APPEND descriptor; in enforce mode
// those are carried out as reads and checked writes. `in_offset` may be null (the input's own position
// is used and left just after the bytes written); `out_offset` null means the output position.
ssize_t copy_by_write(int in_fd, off64_t* in_offset, int out_fd, off64_t* out_offset, size_t count);

// The input of a copy (copy_file_range, sendfile, splice) is read: when it is a guarded descriptor, the
// read is noted as a read() of it is (shim/guard_descriptor.h note_read: the position it moves, and, for
// a descriptor the program opened read-write and appendguard made write-only, whose copies fail EBADF, one
// report). `moves_position`: the call had no input offset. Leaves errno as it was.
void note_copy_input(const char* operation, int in_fd, bool moves_position, ssize_t result);

// A signal handler writing to the file whose guarded call it interrupted: that call holds the file's
// lock and has not recorded its own bytes yet, so this write cannot be placed. It is refused.
ssize_t refuse_write_from_interrupting_handler(const char* operation, int fd, Description* d, uint64_t count);

// What a refused write's report needs, gathered only on that path.
struct RefusedWrite {
  uint64_t count;
  bool has_offset;
  WriteVerdict verdict;
  uint64_t intended_offset;
  uint64_t landing_offset;
  uint64_t end_of_file;
  bool moved_by_another_process;
};

// The parts of guarded_write that are not on the path of an allowed write. They take copies of the
// fields they need, never the address of guarded_write's request, state or check: a structure whose
// address leaves the function lives in memory, and the file lock's atomics then make every read of it on
// the allowed path a load (the request's fields would no longer be constants).
bool refuse_or_report_write(const char* operation, int fd, Description* d, const RefusedWrite& write);
void trace_write(const char* operation, int fd, const Description* d, uint64_t count,
                 uint64_t intended_offset, uint64_t end_of_file, ssize_t result);

// A description whose kernel offset another process may have moved (shares_offset): reads the offset
// and the size back before a write at the position, into `d` and its file, so that the check sees where
// the bytes would land. Returns true if the offset had moved. File lock held.
bool refresh_shared_offset(int fd, Description* d);

// A program that asked for O_APPEND writes at the position of a descriptor that does not append (a file
// written anew, a held session) whose kernel offset is not at the end (the program seeked): without the
// library its write would append, so the kernel offset is moved to the end first. Returns true if it was
// (the check is then made again). File lock held.
bool move_to_end_for_append(int fd, Description* d, bool has_offset, uint64_t intended_offset,
                            uint64_t end_of_file);

// The first bytes written into an empty *.safetensors file: its header's length (a little-endian u64, at
// most 100 MB as safetensors allows), so that its close can tell a header alone (PyTorch's consolidation
// writes each header, closes, reopens "r+b") from a complete file (held_sessions.cpp). Called by a
// plain write at position 0, inside its `perform` (file lock held); looks only at an empty file.
void note_first_bytes(Description* d, const void* bytes, size_t count);

template <typename Perform>
[[gnu::always_inline]] inline ssize_t guarded_write(const char* operation, int fd, Description* d,
                                                    const WriteRequest request, Perform&& perform) {
  // The kernel's own EINVAL for a negative offset, whatever the mount.
  if (request.has_offset && static_cast<int64_t>(request.offset) < 0) return perform();
  HeldFile file(fd, d);
  if (__builtin_expect(!file, 0)) {
    if (file.held_by_interrupted_call())
      return refuse_write_from_interrupting_handler(operation, fd, d, request.count);
    return fail_on_closed_descriptor();
  }
  const bool moved_by_another_process =
      d->shares_offset.load(std::memory_order_relaxed) && refresh_shared_offset(fd, d);
  PositionState state = file.snapshot();
  WriteCheck check = check_write(state, request, g_config->mode == Mode::kEnforce);
  if (__builtin_expect(check.verdict != WriteVerdict::kAllowed, 0) &&
      check.verdict != WriteVerdict::kAfterFailedRead &&
      move_to_end_for_append(fd, d, request.has_offset, check.intended_offset, state.end_of_file)) {
    state = file.snapshot();
    check = check_write(state, request, g_config->mode == Mode::kEnforce);
  }
  if (__builtin_expect(check.verdict != WriteVerdict::kAllowed, 0) &&
      !(check.verdict == WriteVerdict::kNotAtEnd && d->site.writes_in_place)) {
    file.release();
    const RefusedWrite refused{request.count,           request.has_offset,   check.verdict,
                               check.intended_offset,   check.landing_offset, state.end_of_file,
                               moved_by_another_process};
    if (!refuse_or_report_write(operation, fd, d, refused)) return -1;
    file.reacquire(fd, d);
    if (!file) return fail_on_closed_descriptor();
    state = file.snapshot();
    check = check_write(state, request, false);
  }
  ssize_t result = perform();  // releasing the lock below leaves errno as the call set it
  if (result > 0) {
    apply_write(state, request, check.landing_offset, static_cast<uint64_t>(result));
    file.store(state);
    file->count_write(static_cast<uint64_t>(result));
  }
  file.release();
  if (__builtin_expect(result < 0, 0)) note_failed_guarded_call(operation, fd, d, errno);
  if (__builtin_expect(tracing(), 0))
    trace_write(operation, fd, d, request.count, check.intended_offset, state.end_of_file, result);
  return result;
}

}  // namespace appendguard
