#include "shim/guard_open.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/errno_names.h"
#include "core/path.h"
#include "core/thread_id_cache.h"
#include "report/report.h"
#include "report/summary.h"
#include "shim/descriptor_identity.h"
#include "shim/guard_descriptor.h"
#include "shim/guarded_paths.h"
#include "shim/held_sessions.h"
#include "shim/mount_guard.h"
#include "shim/runtime.h"
#include "shim/store_refusal.h"
#include "shim/trace.h"
#include "shim/violation.h"

namespace appendguard {
namespace {

// libc's syscall() itself, not our hook of it.
pid_t gettid_raw() {
  return static_cast<pid_t>(real_syscall(SYS_gettid));
}

// This thread's id for the open sites (core/thread_id_cache.h): asked once per thread and process.
__attribute__((tls_model("initial-exec"))) constinit thread_local ThreadIdCache t_thread_id;

[[gnu::noinline]] void report_open_in_audit(const OpenRequest& request, const OpenDecision& decision, int fd,
                                            Description* d, uint64_t size) {
  int access = request.flags & O_ACCMODE;
  const char* why = nullptr;
  if (access == O_RDWR && decision.existed) {
    why =
        "opens an existing file read-write; an append-only mount gives a read stream whose writes fail "
        "(enforce mode rewrites this open to O_WRONLY|O_APPEND)";
  } else if (access == O_WRONLY && !(request.flags & (O_APPEND | O_TRUNC)) && decision.existed && size > 0) {
    why =
        "opens an existing file for writing without O_APPEND; on HDFS this replaces the file (enforce "
        "mode adds O_APPEND)";
  }
  if (!why) return;
  Violation v = violation_on(request.function, fd, d, size, why);
  v.fixed_by_enforce = true;
  raise_violation(v);
}

// The mount refused the open we rewrote: say why the program sees this error, since it did not ask for
// these flags.
[[gnu::noinline]] void explain_refused_rewrite(const OpenRequest& request, const OpenDecision& decision,
                                               int error) {
  if (error != EPERM && error != EOPNOTSUPP && error != EINVAL && error != ENOSYS) return;
  char effective[160];
  format_open_flags(decision.flags, effective, sizeof effective);
  char message[kMaxPath + 512];
  std::snprintf(message, sizeof message,
                "%s(\"%s\"): the filesystem refused the open %s (%s) with %s: it does not append "
                "to existing files (mountpoint-s3 does so only with --incremental-upload on S3 Express One "
                "Zone); APPENDGUARD_REOPEN=rewrite writes such files anew instead; see limits.md "
                "(man appendguard)",
                request.function, decision.path,
                decision.flags != request.flags ? "as rewritten" : "to append", effective, errno_name(error));
  report_notice(message);
}

[[gnu::noinline]] void explain_refused_rewrite_by_truncation(const OpenRequest& request,
                                                             const OpenDecision& decision, int error) {
  if (error != EPERM && error != EOPNOTSUPP && error != EINVAL && error != ENOSYS && error != EACCES) return;
  char effective[160];
  format_open_flags(decision.flags, effective, sizeof effective);
  char message[kMaxPath + 512];
  // A write-once store that also refuses to replace a file (mountpoint-s3 without --allow-overwrite)
  // takes no append at all: O_APPEND fails there as well.
  const bool write_once = store_kind_of(decision.path) == StoreKind::kWriteOnce;
  std::snprintf(message, sizeof message,
                "%s(\"%s\"): APPENDGUARD_REOPEN=rewrite reopens an existing file truncating it (%s) to write "
                "its bytes back, and the filesystem refused that with %s; the file is unchanged. %s; see "
                "stores.md (man appendguard)",
                request.function, decision.path, effective, errno_name(error),
                write_once ? "This write-once store neither appends to an existing file nor lets it be "
                             "replaced: no setting of appendguard can add to it here (write the file in one "
                             "session, or allow overwrites on the store)"
                           : "A kernel append-only file (chattr +a) or a store that appends but cannot "
                             "replace a file needs APPENDGUARD_REOPEN=append (the default)");
  report_notice(message);
}

// Out of line, like the other notices: their message buffers would otherwise sit in finish_open's frame on
// every guarded open (issue 24, item 6: a small thread stack).
[[gnu::noinline]] void report_untrackable(const OpenDecision& decision, int fd) {
  char message[kMaxPath + 200];
  std::snprintf(message, sizeof message, "cannot track %s (fd %d): descriptor above %d or out of memory%s",
                decision.path, fd, kMaxTrackedFd - 1,
                g_config->mode == Mode::kEnforce ? "; the open fails with EMFILE" : "");
  report_notice(message);
}

// The open could not be tracked (reserve_description, track_reserved): said; in enforce mode it fails.
[[gnu::noinline]] int untrackable(const OpenDecision& decision, int fd, int error) {
  report_untrackable(decision, fd);
  if (g_config->mode == Mode::kEnforce) {
    real_close(fd);
    errno = EMFILE;
    return -1;
  }
  errno = error;
  return fd;
}

// Out of line, with their flag texts: not in finish_open's frame on every guarded open.
[[gnu::noinline]] void trace_open(const OpenRequest& request, const OpenDecision& decision, int fd,
                                  int error) {
  char flags_text[160];
  format_open_flags(request.flags, flags_text, sizeof flags_text);
  trace(request.function, fd, decision.path, fd, error, "flags=%s", flags_text);
}

[[gnu::noinline]] void trace_guarded_open(const OpenRequest& request, const OpenDecision& decision, int fd,
                                          uint64_t size, bool reused_session, bool starts_session) {
  char flags_text[160];
  char effective_text[160];
  format_open_flags(request.flags, flags_text, sizeof flags_text);
  format_open_flags(decision.flags, effective_text, sizeof effective_text);
  trace(request.function, fd, decision.path, fd, 0, "flags=%s effective=%s size=%llu%s", flags_text,
        effective_text, static_cast<unsigned long long>(size),
        reused_session   ? " (held session reused)"
        : starts_session ? " (session held at close)"
        : decision.spool ? " (spooled: uploaded at its rename or close)"
                         : "");
}

// A held session of the file answers this write open (shim/held_sessions.h): out of line, its record
// is not in decide_open's frame.
[[gnu::noinline]] bool answered_by_held_session(const OpenRequest& request, const struct stat64& st,
                                                OpenDecision& decision) {
  HeldReuse held;
  if (!take_held_for_open(st.st_dev, st.st_ino, request.flags, held)) return false;
  decision.reuse_fd = held.fd;
  decision.reuse_end = held.end_of_file;
  decision.flags = held.effective_flags;
  return true;
}

}  // namespace

void decide_open(const OpenRequest& request, OpenDecision& decision) {
  // `decision` is new (its defaults: nothing decided, issue 27 counts each store here).
  decision.flags = request.flags;
  if (!request.path || InternalScope::active()) return;
  Mode mode = current_mode();
  if (mode == Mode::kOff) return;
  bool writes = is_write_open(request.flags);
  if (!writes && __builtin_expect(any_held_sessions(), 0))
    commit_held_before_read(request.dirfd, request.path);
  if (!writes && !g_config->trace) return;
  // Measured by write_open_triage when the hook asked it.
  const size_t length = request.measured_length ? request.measured_length - 1 : std::strlen(request.path);
  const NameMatch name_may_match =
      request.measured_length ? request.name_may_match : name_match_of(request.path, length);
  // The path buffer is taken only where the path is made (issue 27: an unmatched write open makes none).
  decision.by_name = name_may_match != NameMatch::kNo &&
                     matched_by_name_slowly(request.dirfd, request.path, length, decision.take_path(),
                                            &decision.path_length, name_may_match);
  if (!decision.by_name && !(writes && __builtin_expect(g_files.any_live_file(), 0) &&
                             opens_a_tracked_file_slow(request.dirfd, request.path, decision.take_path()))) {
    // Not by name: a write open on an append-only mount is guarded all the same.
    if (!writes || surely_off_append_only_mounts(request.dirfd, request.path, length) ||
        !on_append_only_mount_made(request.dirfd, request.path, decision.take_path()))
      return;
  }
  if (!writes) {
    decision.trace_only = true;
    return;
  }
  // Only regular files are rewritten: an O_RDWR open of a FIFO made write-only would block until a
  // reader came. A file that does not exist yet will be a regular one.
  struct stat64 st;
  const bool exists = fstatat64(request.dirfd, request.path, &st, 0) == 0;
  if (exists && !S_ISREG(st.st_mode)) return;
  decision.owner_pid = file_table_owner_pid();
  if (!decision.owner_pid && open_in_child_sharing_memory(request.function, decision.path))
    return;  // left as asked
  decision.guarded = true;
  decision.exists = exists;
  if (mode == Mode::kEnforce) {
    if (exists && __builtin_expect(any_held_sessions(), 0) && answered_by_held_session(request, st, decision))
      return;
    if (exists) {
      refresh_mounts_for(st.st_dev);  // a store mounted after start-up
      decision.refreshed = true;
      decision.refreshed_device = st.st_dev;
    }
    // The mount holding the path, looked up once (issue 27); the table read before: a change is seen.
    decision.facts_table = g_all_mounts.load(std::memory_order_acquire);
    if (decision.facts_table) decision.facts = decision.facts_table->facts_of(decision.made_path());
    decision.facts_decided = true;
    decision.hold = hold_mode_for(decision.facts.kind);
    decision.flags = rewrite_open_flags(request.flags);
    if (__builtin_expect(decision.hold, 0)) {
      // rclone --vfs-cache-mode minimal serves a read-write or appending open from its cache (sqlite,
      // zipfile's mode "a", `tar -r`, "r+b" writes in place, two processes appending all work there
      // without the library): kept as asked, tracked, never held; the writes below the end of a file no
      // pattern names go through (a named one's are refused as anywhere), and so do its size changes.
      if (decision.facts.caches_read_write &&
          ((request.flags & O_ACCMODE) == O_RDWR || (request.flags & O_APPEND))) {
        decision.flags = request.flags;
        decision.hold = false;
        decision.in_place = !decision.by_name;
        return;
      }
      // A truncating open where sessions are held (a write-once store) starts a new upload from offset 0,
      // whose writes rclone --vfs-cache-mode off fails with ESPIPE under O_APPEND (`dd oflag=append`
      // without conv=notrunc left the file empty): the program's O_APPEND is carried out here instead, as
      // for a file written anew (its writes must land at the end, where the kernel offset is then moved).
      if (decision.flags & O_TRUNC) decision.flags &= ~O_APPEND;
    }
    // A new file on a store without rename: the spool (shim/spool.h; an existing file is not asked about).
    decision.spool = !exists && spools(request, decision);
    // A file this process did not start (or no longer holds) cannot be appended to on a write-once
    // store: it is written anew.
    decision.rewrite_existing =
        (g_config->reopen == Reopen::kRewrite || decision.hold) && keeps_existing_bytes(request.flags);
  } else {
    decision.existed = exists;
  }
}

int finish_open(const OpenRequest& request, const OpenDecision& decision, int fd) {
  int error = errno;
  InternalScope internal;
  if (decision.trace_only || fd < 0) {
    if (fd < 0 && decision.rewrite_existing) {
      explain_refused_rewrite_by_truncation(request, decision, error);
    } else if (fd < 0 && (decision.flags != request.flags ||
                          (decision.guarded && decision.exists && (decision.flags & O_APPEND) &&
                           store_kind_of(decision.path) == StoreKind::kWriteOnce))) {
      // Also the program's own O_APPEND open of an existing file, which a write-once store refuses under
      // APPENDGUARD_REOPEN=append: the setting that works is said (measured: rewrite and hold append by
      // writing the file anew on appendonlyfs s3 and rclone off, e2e.test_overwrite_append).
      explain_refused_rewrite(request, decision, error);
    } else if (fd < 0 && decision.guarded) {
      // Passed on as asked, and refused by the store itself (appendonlyfs strict refuses an O_TRUNC open
      // of an existing file): said, once per file, on a FUSE or append-only mount (issue 23).
      note_refused_guarded_open(request.function, decision.path, decision.flags, error);
    }
    if (fd >= 0) forget_if_stale(fd);
    if (tracing()) trace_open(request, decision, fd, error);
    errno = error;
    return fd;
  }
  // A vfork child shares our memory: its descriptors must not enter the parent's table (after its exec
  // they are carried like any other). The pid is the site's too.
  const pid_t pid = decision.owner_pid ? decision.owner_pid : file_table_owner_pid();
  if (!pid) {
    errno = error;
    return fd;
  }
  struct stat64 st;
  if (real_fstat64(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    forget_if_stale(fd);  // a device or FIFO that happens to match: not a file we can reason about
    errno = error;
    return fd;
  }
  // Written in place (issue 27): the description is this call's until track_reserved publishes it, so the
  // site's frames are captured straight into it, outside the registry's lock, and nothing is copied.
  Description* d = g_files.reserve_description();
  if (!d) return untrackable(decision, fd, error);
  OpenSite& site = d->site;
  site.function = request.function;
  site.original_flags = request.flags;
  site.effective_flags = decision.flags;
  site.written_back = decision.written_back;
  site.reused_held = decision.reuse_fd >= 0;
  site.writes_in_place = decision.in_place;
  site.pid = pid;
  site.tid = t_thread_id.get(pid, gettid_raw);
  site.frame_count = capture_open_site(site.frames, kOpenFrames, request.cfa);

  OpenedFile opened;
  opened.path = decision.path;
  opened.path_length = decision.path_length;
  opened.device = st.st_dev;
  opened.inode = st.st_ino;
  opened.truncated = (decision.flags & O_TRUNC) != 0;
  // After O_TRUNC the file holds what the library wrote back (APPENDGUARD_REOPEN=rewrite), nothing else,
  // whatever fstat says: rclone --vfs-cache-mode off reports the old size for seconds (issue 23).
  opened.size = opened.truncated ? decision.written_back : static_cast<uint64_t>(st.st_size);
  const bool program_appends = (request.flags & O_APPEND) != 0;
  const bool kernel_appends = (decision.flags & O_APPEND) != 0;
  // A file written anew for a program that asked for O_APPEND: its next write lands at the end, where
  // reopen_by_rewriting left the kernel offset.
  uint64_t position = decision.written_back > 0 && program_appends ? decision.written_back : 0;
  d->program_appends = program_appends;
  d->kernel_appends = kernel_appends;
  d->readable_by_program = (request.flags & O_ACCMODE) == O_RDWR;
  d->shares_offset.store(false, std::memory_order_relaxed);
  // A new file's store is known only now (its device): decide_open could not refresh the mounts for it.
  bool decision_hold_after_open = false;
  MountFacts facts = decision.facts;
  bool facts_known = decision.facts_decided;
  if (g_config->mode == Mode::kEnforce && decision.reuse_fd < 0 && !decision.hold) {
    if (!decision.refreshed || decision.refreshed_device != st.st_dev) refresh_mounts_for(st.st_dev);
    // Looked up already, unless the table changed since (this open's new device, or another thread's).
    const MountTable* table = g_all_mounts.load(std::memory_order_acquire);
    if (!decision.facts_decided || table != decision.facts_table) {
      facts = table ? table->facts_of(decision.made_path()) : MountFacts{};
      facts_known = true;
      decision_hold_after_open = hold_mode_for(facts.kind);
    }
  }
  // For the close (shim/spool.cpp), which then looks nothing up.
  d->store_renames = !facts_known    ? StoreRenames::kUnknown
                     : facts.renames ? StoreRenames::kYes
                                     : StoreRenames::kNo;
  // Held only where a reopen is expected: a file guarded by name (PyTorch's consolidation reopens its
  // *.safetensors), or everywhere under APPENDGUARD_REOPEN=hold. Another file guarded by its mount is
  // committed at its close, so that another process (another rank) reads it as without the library: a
  // held session keeps it unreadable there (EPERM on mountpoint-s3, ENOENT on rclone off) until it ends.
  const bool starts_session =
      !decision.spool && (decision.hold || decision_hold_after_open) &&
      (decision.by_name || g_config->reopen == Reopen::kHold) &&
      ((decision.flags & O_TRUNC) || (!decision.exists && (decision.flags & O_CREAT)));
  d->starts_session = starts_session;
  if (starts_session) start_held_committer();  // not at the close: it may be in a signal handler
  const bool reused_session = decision.reuse_fd >= 0;
  if (reused_session) {
    // The held session: the kernel offset is where the program's position is (reuse_held_descriptor),
    // the end of what it wrote for a program that asked for O_APPEND, else 0; the descriptor appends only
    // if its first open had O_APPEND (a pwrite of a program that asked for O_APPEND lands at its offset).
    opened.size = decision.reuse_end;
    opened.truncated = false;
    position = program_appends ? decision.reuse_end : 0;
  }
  d->reused_session = reused_session;
  d->position = position;
  const uint64_t size = opened.size;
  if (!g_files.track_reserved(fd, d, opened)) return untrackable(decision, fd, error);
  if (decision.spool) register_spooled(decision.path, st.st_dev, st.st_ino);
  count_event(g_summary.guarded_opens);
  if (decision.flags != request.flags) count_event(g_summary.rewritten_opens);
  if (g_config->mode == Mode::kAudit) report_open_in_audit(request, decision, fd, d, size);
  if (tracing()) trace_guarded_open(request, decision, fd, size, reused_session, starts_session);
  errno = error;
  return fd;
}

void forget_thread_id_after_fork_child() {
  t_thread_id.forget();
}

bool adopt_if_guarded(int fd, const char* function, const CarriedFd* carried, size_t carried_count) {
  int kernel_flags = real_fcntl(fd, F_GETFL);
  if (kernel_flags < 0 || (kernel_flags & O_ACCMODE) == O_RDONLY) return false;
  char path[kMaxPath];
  if (!descriptor_path(fd, path, sizeof path) || path[0] != '/') return false;
  struct stat64 st;
  if (real_fstat64(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const CarriedFd* record = match_carried_fd(carried, carried_count, fd, st.st_dev, st.st_ino, kernel_flags);
  if (!record && !guards_full_path(path)) return false;
  const bool kernel_appends = (kernel_flags & O_APPEND) != 0;
  OpenSite site;
  site.function = function;
  site.pid = static_cast<pid_t>(syscall(SYS_getpid));
  site.tid = gettid_raw();
  site.original_flags = record ? record->original_flags : kernel_flags;
  site.effective_flags = record ? record->effective_flags : kernel_flags;
  OpenRecord open_record;
  open_record.path = path;
  open_record.device = st.st_dev;
  open_record.inode = st.st_ino;
  open_record.size = static_cast<uint64_t>(st.st_size);
  if (record && kernel_appends) {
    open_record.position = record->position;  // the kernel's offset of an O_APPEND descriptor means nothing
  } else {
    off64_t position = real_lseek64(fd, 0, SEEK_CUR);
    open_record.position = position > 0 ? static_cast<uint64_t>(position) : 0;
    // A carried truncating description on a write-once store (bash's `cat > f`: the shell opens "wb",
    // cat inherits it): its bytes are those written from 0 to the offset (the store takes nothing else),
    // while fstat may still show the size from before the O_TRUNC (rclone --vfs-cache-mode off).
    if (record && (record->effective_flags & O_TRUNC)) {
      refresh_mounts_for(st.st_dev);
      if (store_kind_of(path) == StoreKind::kWriteOnce) open_record.size = open_record.position;
    }
  }
  open_record.kernel_appends = kernel_appends;
  open_record.program_appends = (site.original_flags & O_APPEND) != 0;
  open_record.readable_by_program = (site.original_flags & O_ACCMODE) == O_RDWR;
  open_record.shares_offset = true;  // the process it came from may still hold it
  open_record.site = &site;
  return g_files.track(fd, open_record) != nullptr;
}

char* read_whole_file(int fd, uint64_t size) {
  char* data = static_cast<char*>(std::malloc(size));
  if (!data) {
    errno = ENOMEM;
    return nullptr;
  }
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = real_read(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;  // the file shrank under us
      std::free(data);
      return nullptr;
    }
    done += static_cast<uint64_t>(n);
  }
  return data;
}

void report_rewrite_failure(const OpenDecision& decision, uint64_t written, uint64_t size, int error) {
  char message[kMaxPath + 700];
  if (written == 0 && size > kMaxRewriteBytes) {
    std::snprintf(message, sizeof message,
                  "%s: appendguard writes an existing file anew (truncating it and writing its bytes back, "
                  "as APPENDGUARD_REOPEN=rewrite and write-once stores need for a file this process did not "
                  "start) only up to %llu bytes, since a process killed during the write-back leaves it "
                  "truncated; it has %llu: the open fails with EFBIG and the file is unchanged. Write it in "
                  "one session (a file this process creates is held open across its close and reused), or "
                  "on a store that appends use APPENDGUARD_REOPEN=append; see limits.md (man appendguard)",
                  decision.path, static_cast<unsigned long long>(kMaxRewriteBytes),
                  static_cast<unsigned long long>(size));
  } else {
    std::snprintf(
        message, sizeof message,
        "%s: APPENDGUARD_REOPEN=rewrite wrote back %llu of the file's %llu bytes (%s); the open fails. "
        "On a store that replaces files when they are closed the old file is intact; elsewhere the "
        "file now holds %llu bytes",
        decision.path, static_cast<unsigned long long>(written), static_cast<unsigned long long>(size),
        errno_name(error), static_cast<unsigned long long>(written));
  }
  report_notice(message);
}

int reuse_held_descriptor(const OpenRequest& request, const OpenDecision& decision) {
  int fd = decision.reuse_fd;
  real_fcntl(fd, F_SETFD, (request.flags & O_CLOEXEC) ? FD_CLOEXEC : 0);
  real_lseek64(fd, (request.flags & O_APPEND) ? static_cast<off64_t>(decision.reuse_end) : 0, SEEK_SET);
  return fd;
}

}  // namespace appendguard
