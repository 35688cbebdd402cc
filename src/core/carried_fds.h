// What a process knows about its guarded descriptors that the kernel does not show, carried across exec
// in one environment variable: which flags the program asked for (appendguard may have rewritten O_RDWR
// into O_WRONLY|O_APPEND) and where the program believes it writes. Without it, the new program would
// take a rewritten descriptor for one opened to append, and let writes at its position 0 through.
//
// Format: "PID;FD,DEV,INO,ORIGINAL,EFFECTIVE,POSITION;..." with every number in hex. PID is the process
// that called exec (exec keeps the pid), or "p" and the parent's pid for posix_spawn (the child is new):
// a variable passed on by a program without the library is ignored by any other process. Formatting allocates
// nothing and calls no libc (it runs in vfork children).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace appendguard {

inline constexpr char kCarriedFdsVariable[] = "APPENDGUARD_CARRIED_FDS";
// The longest record: ';' and six hex numbers of at most 16 digits with their commas.
inline constexpr size_t kMaxCarriedRecordLength = 1 + 6 * 16 + 5;

struct CarriedFd {
  int fd = -1;
  uint64_t device = 0;
  uint64_t inode = 0;
  int original_flags = 0;   // what the program asked for
  int effective_flags = 0;  // what appendguard opened
  uint64_t position = 0;    // where the program believes it writes
};

// Who reads the variable: the process that execs itself, or the children a process spawns.
struct CarrierReader {
  pid_t pid;
  bool is_child;  // `pid` is the reader's parent
  // The records are every guarded descriptor the new program holds (an exec by the process itself, whose
  // table is exact, under the same APPENDGUARD_PATHS and APPENDGUARD_FS): the new program adopts those
  // numbers and looks at no other descriptor (issue 27: the scan of every inherited descriptor made a
  // fork+exec with 5,000 of them 17 times as slow). Written "cPID;...".
  bool complete = false;
};

// The capacity format_carried_fds needs for `count` records ("NAME=pPID" and the NUL included): with it
// no record is left out.
constexpr size_t carried_fds_capacity(size_t count) {
  return sizeof kCarriedFdsVariable + 2 + 16 + count * kMaxCarriedRecordLength;
}

// Writes "NAME=PID;..." into `out` (NUL-terminated). Records that do not fit are left out; returns how
// many were written.
size_t format_carried_fds(CarrierReader reader, const CarriedFd* fds, size_t count, char* out,
                          size_t capacity);

// How many records a value holds at most (its ';'): the size of the array parse_carried_fds fills.
size_t count_carried_records(const char* text);

// Parses the variable's value in process `self` whose parent is `parent`. Returns the number of records
// (at most `capacity`), or 0 when the value is malformed or was not meant for this process.
// `complete`, if given, is set when the value is valid, for this process, and says its records are every
// guarded descriptor inherited (CarrierReader::complete).
size_t parse_carried_fds(const char* text, pid_t self, pid_t parent, CarriedFd* out, size_t capacity,
                         bool* complete = nullptr);

// The record for descriptor `fd` of file (device, inode): the one carried for that number, else one for
// the same file whose effective flags match `kernel_flags` (a descriptor moved to another number, as
// spawn's dup2 onto stdout does), preferring a rewritten one. Null when none is for this file.
const CarriedFd* match_carried_fd(const CarriedFd* fds, size_t count, int fd, uint64_t device, uint64_t inode,
                                  int kernel_flags);

}  // namespace appendguard
