// The end-of-file rule: a write is allowed iff it lands exactly at the end of file. Pure: operates on a
// snapshot of one open description and its file, so every case is unit-testable.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace appendguard {

struct PositionState {
  uint64_t position = 0;         // where the program believes the description is
  uint64_t end_of_file = 0;      // the file's end as this process knows it
  bool program_appends = false;  // the program itself asked for O_APPEND
  bool kernel_appends = false;   // the real descriptor has O_APPEND (ours or the program's)
  // A read of this description failed because appendguard made it write-only (enforce mode): what the
  // program writes next may rest on what it could not read (Python's zipfile takes an unreadable archive
  // for no archive and appends a new one to it), so every later write is refused.
  bool read_failed = false;
};

struct WriteRequest {
  uint64_t count = 0;
  bool has_offset = false;  // pwrite family: `offset` is explicit and the position does not move
  uint64_t offset = 0;
  bool rwf_append = false;    // pwritev2 RWF_APPEND
  bool rwf_noappend = false;  // pwritev2 RWF_NOAPPEND: writes in place even on an O_APPEND descriptor

  // write, writev, fwrite: at the descriptor's position.
  static WriteRequest at_position(uint64_t count) { return {.count = count}; }
  // pwrite and the like: at an explicit offset, the position does not move.
  static WriteRequest at_offset(uint64_t count, int64_t offset) {
    return {.count = count, .has_offset = true, .offset = static_cast<uint64_t>(offset)};
  }
};

enum class WriteVerdict { kAllowed, kNotAtEnd, kNoAppendFlag, kAfterFailedRead };

struct WriteCheck {
  WriteVerdict verdict = WriteVerdict::kAllowed;
  uint64_t intended_offset = 0;  // where the program means the bytes to go
  uint64_t landing_offset = 0;   // where the kernel will put them if the call goes through
};

// `refuse_noappend`: enforce mode, where RWF_NOAPPEND would bypass the O_APPEND we added. Inline, like
// apply_write: both run on every guarded write.
// A write is allowed when both where the program means it to go (the intended offset) and where the kernel
// will put it (the landing offset) are the end of file: a descriptor appendguard opened without O_APPEND
// (a file written anew, a held session) for a program that asked for O_APPEND lands at its kernel offset,
// which must be the end (issue 23). The kernel appends every write of an O_APPEND descriptor and every
// RWF_APPEND write, pwrite's included (man 2 pwrite, BUGS): where the program itself asked for O_APPEND
// (or RWF_APPEND), it means the end whatever the offset.
inline WriteCheck check_write(const PositionState& state, const WriteRequest& request, bool refuse_noappend) {
  WriteCheck check;
  const bool kernel_appends = (state.kernel_appends && !request.rwf_noappend) || request.rwf_append;
  const bool program_appends = (state.program_appends && !request.rwf_noappend) || request.rwf_append;
  const uint64_t at = request.has_offset ? request.offset : state.position;
  check.intended_offset = program_appends ? state.end_of_file : at;
  check.landing_offset = kernel_appends ? state.end_of_file : at;
  if (request.rwf_noappend && refuse_noappend) {
    check.verdict = WriteVerdict::kNoAppendFlag;
  } else if (request.count > 0 && (check.intended_offset != state.end_of_file ||
                                   check.landing_offset != state.end_of_file || state.read_failed)) {
    check.verdict = state.read_failed ? WriteVerdict::kAfterFailedRead : WriteVerdict::kNotAtEnd;
  }
  return check;
}

// Advances position and end of file after `written` bytes landed at `landing_offset`.
inline void apply_write(PositionState& state, const WriteRequest& request, uint64_t landing_offset,
                        uint64_t written) {
  uint64_t end = landing_offset + written;
  if (end > state.end_of_file) state.end_of_file = end;
  if (!request.has_offset) state.position = end;
}

struct SeekResult {
  off64_t offset = -1;
  int error = 0;  // errno when offset < 0
};

// lseek answered from the logical position: SEEK_SET, SEEK_CUR, SEEK_END, and SEEK_DATA/SEEK_HOLE as for
// a file without holes.
SeekResult compute_seek(uint64_t position, uint64_t end_of_file, off64_t offset, int whence);

bool truncate_is_noop(uint64_t end_of_file, off64_t length);
// Size-preserving fallocate: FALLOC_FL_KEEP_SIZE alone, or mode 0 within the current end.
bool fallocate_is_noop(uint64_t end_of_file, int mode, off64_t offset, off64_t length);

// Deferred preallocation: a resize that never cuts below the bytes written (ftruncate to at least the
// end; fallocate mode 0 or FALLOC_FL_KEEP_SIZE) need not reach the mount. The program is told it
// succeeded, sees `logical_size` as the file's size, and the file is filled with zeros up to it when it
// is closed. `fallocate_mode` is -1 for a truncation; `logical_size` is the size the program sees now
// (the end of file, or more after an earlier deferral).
struct DeferredResize {
  bool deferrable = false;
  uint64_t logical_size = 0;  // after the call
};
DeferredResize defer_resize(uint64_t end_of_file, uint64_t logical_size, int fallocate_mode, off64_t offset,
                            off64_t length);

}  // namespace appendguard
