#include "shim/guard_descriptor.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "core/unguarded_failure.h"
#include "shim/guard_size.h"
#include "shim/held_file.h"
#include "shim/held_sessions.h"
#include "shim/path_scratch.h"
#include "shim/real_io.h"
#include "shim/report_once.h"
#include "shim/spool.h"
#include "shim/store_refusal.h"
#include "shim/thread_exit.h"
#include "shim/trace.h"
#include "shim/violation.h"

namespace appendguard {

namespace {

// A description found by lookup(), pinned while it is read outside a guarded call (FileTable::pin): a
// close racing on another thread may recycle it, and its memory may then read as zeros
// (core/page_pool.h). False (nothing to read) when it was recycled already.
class Pinned {
 public:
  explicit Pinned(Description* d) : d_(d && g_files.pin(d) ? d : nullptr) {}
  ~Pinned() {
    if (d_) g_files.unpin(d_);
  }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  explicit operator bool() const { return d_ != nullptr; }

 private:
  Description* d_;
};

}  // namespace

void note_duplicate(const char* operation, int old_fd, int new_fd) {
  if (new_fd < 0 || !owns_file_table()) return;
  Description* before = g_files.lookup(old_fd);
  g_files.alias(old_fd, new_fd);
  if (!tracing() || !before) return;
  if (Pinned pinned(before); pinned) trace(operation, new_fd, before->path, new_fd, 0, "from fd=%d", old_fd);
}

void note_close(int fd) {
  if (owns_file_table()) g_files.forget(fd);
}

namespace {

// The end of every guarded close: forgotten, then really closed; a spooled file's failed upload is the
// close's error.
inline int close_forgotten(int fd, int upload_error) {
  note_close(fd);
  int result = real_close(fd);
  close_parked_numbers();  // keeps errno
  if (__builtin_expect(upload_error != 0, 0) && result == 0) {
    result = -1;
    errno = upload_error;
  }
  return result;
}

// A close that is traced, or whose store may refuse a descriptor we reopened: what the trace and the
// notice need is copied first (forgetting recycles the description), then the close ends as every other.
// `d`: pinned, or null (nothing to read). Out of line: the plain close keeps no path buffer nor copy.
[[gnu::cold, gnu::noinline]] int close_reporting(int fd, Description* d, bool traced, bool rewritten,
                                                 int upload_error) {
  // The path's copy is made only here: the per-thread buffer's lease (shim/path_scratch.h) was about 70
  // instructions of every guarded close.
  std::optional<PathBuffer> buffer;
  static char no_memory[] = "";
  char* path = no_memory;
  RefusedCall refused{path, 0, 0, false};
  if (d) {
    buffer.emplace();
    if (buffer->get()) {
      path = buffer->get();
      std::snprintf(path, kMaxPath, "%s", d->path);
    }
    refused = RefusedCall::of(d);
    refused.path = path;
    g_files.unpin(d);
  }
  int result = close_forgotten(fd, upload_error);
  if (result < 0 && rewritten && is_store_refusal(errno)) {
    int error = errno;
    explain_store_refusal("close", fd, refused, error);
    errno = error;
  }
  if (traced) {
    int error = errno;
    trace("close", fd, path, result, error, "%s", "");
    errno = error;
  }
  return result;
}

}  // namespace

int close_tracked(int fd) {
  // A cancellation pending at the close is acted on before anything is forgotten, as libc's close acts on
  // it before the system call: the descriptor stays open, and tracked (third adversarial round: forgotten
  // first, it stayed open untracked, and a pwrite at 0 through it appended unchecked). pthread_testcancel.
  act_on_pending_cancellation();
  // On FUSE mounts close reports what the flush of the data found (HDFS: the write errors, write-once
  // stores: a failed upload), so the trace shows its real result and a store's refusal of a descriptor
  // we reopened is explained (close_reporting).
  const bool traced = tracing();
  int upload_error = 0;
  // Pinned while it is read (FileTable::pin): another thread closing the same number at the same time
  // may recycle it, and its memory may then read as zeros (core/page_pool.h); a recycled one is closed as
  // an untracked number. Unpinned before it is forgotten, so that the forget recycles it at once.
  Description* d = g_files.lookup(fd);
  if (d && !g_files.pin(d)) d = nullptr;
  if (!d) {
    if (__builtin_expect(traced, 0)) return close_reporting(fd, nullptr, traced, false, 0);
    return close_forgotten(fd, 0);
  }
  if ((d->starts_session || d->reused_session || d->site.written_back > 0) && hold_instead_of_close(fd, d)) {
    g_files.unpin(d);
    return 0;
  }
  fill_reservation_before_close(fd, d);  // a deferred resize's reservation (shim/guard_size.h)
  // A spooled file's last descriptor: its bytes go to the store now (shim/spool.h).
  if (any_spooled() && g_files.is_last_descriptor_of_file(fd) && upload_spooled_at_close(fd, d) != 0)
    upload_error = errno;
  // A store that renames (as the open found it) has nothing to remember: not called (issue 27).
  if (g_config->mode == Mode::kEnforce && d->store_renames != StoreRenames::kYes) remember_closed_on_store(d);
  const bool rewritten = rewritten_open(d) && !reported_already(d, kStoreRefusalReported);
  if (__builtin_expect(traced || rewritten, 0))
    return close_reporting(fd, d, traced, rewritten, upload_error);
  g_files.unpin(d);
  return close_forgotten(fd, upload_error);
}

void finish_before_implicit_close(int fd) {
  if (!owns_file_table()) return;
  Description* d = g_files.lookup(fd);
  if (!d || !g_files.pin(d)) return;
  fill_reservation_before_close(fd, d);
  // A failed upload is said by the upload (one line).
  if (any_spooled() && g_files.is_last_descriptor_of_file(fd)) upload_spooled_at_close(fd, d);
  if (g_config->mode == Mode::kEnforce && d->store_renames != StoreRenames::kYes) remember_closed_on_store(d);
  g_files.unpin(d);
}

void finish_close_on_exec_descriptors() {
  if (!owns_file_table() || !g_files.any_tracked()) return;
  for_each_tracked_by_close_on_exec(true, [](int fd, Description*) { finish_before_implicit_close(fd); });
}

void note_close_range(const char* operation, unsigned first, unsigned last) {
  if (!owns_file_table()) return;
  int highest = g_files.highest_fd();
  const int end = highest < 0 ? -1 : static_cast<int>(std::min(last, static_cast<unsigned>(highest)));
  for (int fd = g_files.next_slot(static_cast<int>(std::min(first, static_cast<unsigned>(INT32_MAX))), end);
       fd <= end; fd = g_files.next_slot(fd + 1, end)) {
    if (!g_files.lookup(fd)) continue;  // a held number's mark: commit_held_range's
    // Each one finished, then forgotten: the last of a file's descriptors in the range is then its last.
    finish_before_implicit_close(fd);
    if (tracing()) {
      Description* d = g_files.lookup(fd);
      if (Pinned pinned(d); pinned)
        trace(operation, static_cast<int>(fd), d->path, 0, 0, "closed by %s(%u, %u)", operation, first, last);
    }
    g_files.forget(fd);
  }
  g_files.forget_range(first, last);
}

int setfl_flags(Description* d, int requested) {
  if (g_config->mode == Mode::kEnforce && d->kernel_appends) return requested | O_APPEND;
  return requested;
}

void note_setfl(int fd, Description* d, int requested, int applied, int result) {
  if (result != 0) return;
  HeldFile file(fd, d);
  if (!file) return;
  // F_GETFL shows the O_APPEND we added, so a program passing it back is not asking to append.
  if (requested & O_APPEND) {
    if (!d->kernel_appends) d->program_appends = true;
  } else {
    d->program_appends = false;
  }
  d->kernel_appends = (applied & O_APPEND) != 0;
}

void note_read(const char* operation, int fd, Description* d, bool moves_position, ssize_t result,
               int error) {
  Pinned pinned(d);
  if (!pinned) return;  // closed by another thread meanwhile
  if (moves_position && result > 0) {
    if (HeldFile file(fd, d); file) d->position += static_cast<uint64_t>(result);
  }
  const bool enforce = g_config->mode == Mode::kEnforce;
  bool made_write_only =
      (d->site.original_flags & O_ACCMODE) == O_RDWR && (d->site.effective_flags & O_ACCMODE) == O_WRONLY;
  // The program could not read what it meant to: its next writes are refused (PositionState::read_failed).
  if (enforce && made_write_only && result < 0 && error == EBADF) {
    if (HeldFile file(fd, d); file) d->read_failed = true;
  }
  bool report = enforce ? made_write_only : d->readable_by_program;
  if (report && first_report_of(d, kReadReported)) {
    Violation v = violation_on(operation, fd, d, d->file->end_of_file,
                               enforce ? "the program opened the file read-write and now reads it; "
                                         "appendguard made the handle "
                                         "write-only for the append-only mount (only the first read of "
                                         "this descriptor is "
                                         "reported); its later writes are refused, so that nothing the "
                                         "program writes from what it could not read reaches the file"
                                       : "the program reads a file it opened read-write; an append-only "
                                         "mount cannot read and "
                                         "write one handle, and enforce mode makes it write-only so "
                                         "this read would fail with "
                                         "EBADF (only the first read of this descriptor is reported)");
    raise_violation(v, ViolationKind::kObserved, result < 0 ? error : 0);
  }
  if (tracing()) trace(operation, fd, d->path, result, error, "%s", "");
}

void note_mmap(const char* operation, int fd, Description* d, int prot, int flags, bool failed, int error) {
  Pinned pinned(d);
  if (!pinned) return;  // closed by another thread meanwhile
  bool shared_writable = (prot & PROT_WRITE) && (flags & MAP_TYPE) != MAP_PRIVATE;
  if (shared_writable && first_report_of(d, kMapReported)) {
    Violation v = violation_on(operation, fd, d, d->file->end_of_file,
                               "a shared writable mapping writes anywhere in the file; an append-only mount "
                               "refuses it");
    raise_violation(v, ViolationKind::kObserved, failed ? error : 0);
  }
  if (tracing()) trace(operation, fd, d->path, failed ? -1 : 0, error, "prot=%d flags=%#x", prot, flags);
}

}  // namespace appendguard
