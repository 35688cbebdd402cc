// Opening a guarded file: the decision (which flags the real call gets, whether a held session answers
// it, whether the file is written anew), the real call, and the description tracked from its result.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/carried_fds.h"
#include "core/file_table.h"
#include "core/glob.h"
#include "core/mount_table.h"
#include "core/open_flags.h"
#include "core/write_all.h"
#include "shim/guarded_paths.h"
#include "shim/path_scratch.h"
#include "shim/real_io.h"
#include "shim/spool.h"

namespace appendguard {

// ---------------------------------------------------------------- opening
struct OpenRequest {
  const char* function;  // libc name, for reports
  int dirfd;             // AT_FDCWD unless openat
  const char* path;
  int flags;
  // What write_open_triage measured, for decide_open: strlen(path) + 1 (0: not measured), and what the
  // name's ending tells of the patterns (kYes: a "*.ext" pattern matches it as given).
  size_t measured_length = 0;
  NameMatch name_may_match = NameMatch::kNo;
  // The open hook's canonical frame address (the program's call; every frame between it and finish_open
  // is this library's), where the open's site is read back from the stack (report/site_chains.h); 0: not
  // known (the site's recording uses its own).
  uintptr_t cfa = 0;
};

struct OpenDecision {
  // Ordered so that its construction on every guarded open is a few stores (issue 27): the bytes and ints
  // first, packed, then the 8-byte fields, the two left uninitialized last but the path's lease.
  bool guarded = false;           // track the descriptor the real call returns
  bool trace_only = false;        // matched, but read-only: shown in trace mode, not tracked
  bool existed = false;           // audit mode: the file was there before the open
  bool rewrite_existing = false;  // APPENDGUARD_REOPEN=rewrite: truncate and write the old bytes back
  bool exists = false;            // the file was there at the decision
  bool hold = false;              // sessions started by this open are held (shim/held_sessions.h)
  bool by_name = false;           // guarded by a name pattern (not only by its mount)
  bool spool = false;             // a new file on a store without rename, written to the spool (shim/spool.h)
  // A read-write open on rclone --vfs-cache-mode minimal, of a file no pattern names: kept O_RDWR, its
  // writes below the end let through (Description::writes_in_place).
  bool in_place = false;
  // What decide_open did already, which finish_open need not do again (issue 27): the mounts read again
  // for this device (`refreshed`, `refreshed_device`), and the mount holding the path looked up (once: its
  // store kind decides `hold`, its renames `spool` and, kept in the description, what the close does) in
  // `facts_table`, read before the lookup so that finish_open sees a table changed since (this open's new
  // device, or another thread's).
  bool refreshed = false;
  bool facts_decided = false;
  int flags = 0;      // what to pass to the real call
  int reuse_fd = -1;  // a held session answers this open: its descriptor
  // The owner check's answer for a guarded decision (file_table_owner_pid: this process's pid, 0 in a
  // child sharing our memory), which finish_open uses rather than asking the kernel again.
  pid_t owner_pid = 0;
  MountFacts facts;
  uint64_t written_back = 0;  // rewrite: the existing bytes read and written back after truncating
  const MountTable* facts_table = nullptr;
  // Absolute, normalized: a per-thread buffer, not on the stack (shim/path_scratch.h), taken by
  // take_path() only when the path is needed (issue 27: an unmatched write open needs none); null until
  // then, and if no memory could be mapped. Set whenever `guarded` or `trace_only` is.
  char* path = nullptr;
  size_t path_length = 0;  // strlen(path) where decide_open made it with its length known (0: measure it)
  // Read only beside the field that says they were set (issue 27: left uninitialized, the construction of
  // the rest is a few vector stores rather than a loop over the whole decision).
  uint64_t reuse_end;      // reuse_fd >= 0: the bytes written in the held session of reuse_fd
  dev_t refreshed_device;  // refreshed: the device the mounts were read again for
  // The path made, measured only where its length is not known already (issue 27: a strlen per open).
  std::string_view made_path() const {
    return path_length ? std::string_view(path, path_length) : std::string_view(path);
  }
  char* take_path() {
    if (!path) path = path_buffer_.get();
    return path;
  }

 private:
  LazyPathBuffer path_buffer_;
};

// Fills `decision`, newly constructed (its defaults are the decision to leave the open alone), for an
// open in the current mode. Cheap for every open we leave alone.
void decide_open(const OpenRequest& request, OpenDecision& decision);
// Whether decide_open surely leaves a write open alone (measured_length 0), told without a path buffer: no
// pattern may match its name, no file is tracked (which it could be another name of), it is surely on no
// append-only mount (or the library is off for it). decide_open's own first test of a write open; the open
// hooks ask it before making a decision (issue 27).
struct WriteOpenTriage {
  size_t measured_length = 0;  // 0: surely left alone; else strlen(path) + 1
  NameMatch name_may_match = NameMatch::kNo;
};
// Inline, in open_deciding's frame (issue 27: a frame of its own was every write open's).
[[gnu::always_inline]] inline WriteOpenTriage write_open_triage(int dirfd, const char* path) {
  if (!path || InternalScope::active() || current_mode() == Mode::kOff) return {};
  const size_t length = __builtin_strlen(path);
  const NameMatch name_may_match = name_match_of(path, length);
  if (name_may_match == NameMatch::kNo && !g_files.any_live_file() &&
      surely_off_append_only_mounts(dirfd, path, length))
    return {};
  return {length + 1, name_may_match};
}
// Called with the real call's result; returns what the hook returns.
int finish_open(const OpenRequest& request, const OpenDecision& decision, int fd);
// In a fork child: the thread id finish_open keeps per thread is the parent thread's
// (core/thread_id_cache.h).
void forget_thread_id_after_fork_child();
// A descriptor we did not open (inherited across exec, received over a socket), tracked if it is open
// for writing on a regular file that is guarded (by pattern or mount) or that a carried record describes
// (core/carried_fds.h): with what that record says the program asked for, else with what the kernel
// shows. Returns true if it was adopted.
bool adopt_if_guarded(int fd, const char* function, const CarriedFd* carried, size_t carried_count);

// ---------------------------------------------------------------- the real call, as decided

// The largest file APPENDGUARD_REOPEN=rewrite (and the hold mode's fallback for files another process
// wrote) writes anew. From the truncating open to the end of the write-back a SIGKILL leaves the file
// truncated (the kernel's close commits what was written back): measured with 10 kills at random moments,
// 16 MiB files came out shorter 1 time on rclone --vfs-cache-mode off and 2 times on appendonlyfs s3,
// 64 MiB 5 and 4 times. Above this size the open is refused (EFBIG) with a report.
constexpr uint64_t kMaxRewriteBytes = uint64_t{8} << 20;

// Reads all of `fd` (`size` bytes) into a new buffer; null with errno on failure.
char* read_whole_file(int fd, uint64_t size);
void report_rewrite_failure(const OpenDecision& decision, uint64_t written, uint64_t size, int error);

// APPENDGUARD_REOPEN=rewrite, for stores that cannot append to an existing file but replace it
// atomically when it is closed (mountpoint-s3): read what the file holds, open it truncating, write the
// bytes back, and leave the kernel offset where the program's next write lands: at the end for a program
// that asked for O_APPEND (the descriptor written anew does not append: its writes land at the offset),
// at 0 otherwise, as the program expects. A missing file is opened with the
// truncating flags (O_CREAT creates it; without O_CREAT the program gets its ENOENT).
template <typename Call>
int reopen_by_rewriting(OpenDecision& decision, bool program_appends, Call&& call) {
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
    WriteAllResult write_back =
        write_all(size, [&](uint64_t done, uint64_t left) { return real_write(fd, old_bytes + done, left); });
    uint64_t written = write_back.written;
    error = write_back.error_or_eio();
    if (!write_back.complete) {
      report_rewrite_failure(decision, written, size, error);
      real_close(fd);
      fd = -1;
    } else {
      if (!program_appends) real_lseek64(fd, 0, SEEK_SET);
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
// kernel offset where the program's position is: the end of what was written for a program that asked for
// O_APPEND, else 0 (the descriptor appends only if its first open had O_APPEND).
int reuse_held_descriptor(const OpenRequest& request, const OpenDecision& decision);

// A held session's descriptor, the spool or a file written anew: out of line, so that the frame
// reopen_by_rewriting needs is not every guarded open's (issue 27).
template <typename Call>
[[gnu::noinline]] int open_otherwise(const OpenRequest& request, OpenDecision& decision, Call& call) {
  int fd = decision.reuse_fd >= 0 ? reuse_held_descriptor(request, decision)
           : decision.spool
               ? open_spooled(
                     request, decision, [](void* c, int f) { return (*static_cast<Call*>(c))(f); }, &call)
               : reopen_by_rewriting(decision, (request.flags & O_APPEND) != 0, call);
  if (fd == kOpenOnStore) fd = call(decision.flags);
  return fd;
}

// Opens as decided with `call(flags)` (the real libc call), then finish_open.
template <typename Call>
[[gnu::always_inline]] inline int open_as_decided(const OpenRequest& request, OpenDecision& decision,
                                                  Call&& call) {
  const bool otherwise = decision.reuse_fd >= 0 || decision.spool || decision.rewrite_existing;
  const int fd =
      __builtin_expect(otherwise, 0) ? open_otherwise(request, decision, call) : call(decision.flags);
  return finish_open(request, decision, fd);
}

}  // namespace appendguard
