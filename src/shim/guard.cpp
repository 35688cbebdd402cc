#include "shim/guard.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

#include "core/open_flags.h"
#include "core/path.h"
#include "core/unguarded_failure.h"
#include "report/summary.h"
#include "shim/held_sessions.h"
#include "shim/mount_guard.h"
#include "shim/real_io.h"

namespace appendguard {
namespace {

enum ReportOnce : unsigned { kReadReported = 1, kMapReported = 2, kStoreRefusalReported = 4 };

pid_t gettid_raw() {
  return static_cast<pid_t>(syscall(SYS_gettid));
}

// The directory a relative path is resolved against: the working directory or an openat dirfd.
bool base_directory(int dirfd, char* out, size_t capacity) {
  if (dirfd == AT_FDCWD) return getcwd(out, capacity) != nullptr;
  return descriptor_path(dirfd, out, capacity);
}

}  // namespace

bool resolve_full_path(int dirfd, const char* path, char* out) {
  char base[kMaxPath] = "";
  if (path[0] != '/' && !base_directory(dirfd, base, sizeof base)) return false;
  return normalize_path(base, path, out, kMaxPath) > 0;
}

namespace {

// `full_path` with the symlinks of its directory resolved (the directory must exist), as getcwd and
// /proc/self/fd name it; relative opens are resolved this way already.
bool physical_path_of(const char* full_path, char* out) {
  std::string_view path(full_path);
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos || slash == 0) return false;
  char directory[kMaxPath];
  std::memcpy(directory, full_path, slash);
  directory[slash] = '\0';
  int fd = real_open(directory, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  char physical_directory[kMaxPath];
  bool ok = descriptor_path(fd, physical_directory, sizeof physical_directory);
  real_close(fd);
  if (!ok) return false;
  return normalize_path(physical_directory, path.substr(slash + 1), out, kMaxPath) > 0;
}

// A path too long to resolve cannot be matched against the patterns: said once per process.
void notice_unresolvable_path(int dirfd, const char* path) {
  static std::atomic<pid_t> told{0};
  pid_t pid = static_cast<pid_t>(syscall(SYS_getpid));
  if (told.exchange(pid) == pid) return;
  char message[512];
  std::snprintf(message, sizeof message,
                "a write open of \"%.200s...\" (%zu bytes, dirfd %d) is not guarded: its absolute path does "
                "not fit in %zu bytes, so APPENDGUARD_PATHS patterns with '/' cannot be matched against it "
                "(said once per process)",
                path, std::strlen(path), dirfd, kMaxPath);
  InternalScope internal;
  report_notice(message);
}

// APPENDGUARD_PATHS: fills `full_path` (absolute and normalized where it can be resolved) when it matches.
// A pattern with '/' matches the path as given (made absolute) or the same path with the symlinks of its
// directory resolved, so that a file is guarded however it is named (absolute, relative, openat).
bool matched_by_name(int dirfd, const char* path, char* full_path) {
  const PatternSet& patterns = g_config->paths;
  if (!patterns.could_match(path)) return false;
  if (!patterns.needs_full_path() && !patterns.matches({}, file_name_of(path))) return false;
  if (!resolve_full_path(dirfd, path, full_path)) {
    if (patterns.needs_full_path()) {
      notice_unresolvable_path(dirfd, path);
      return false;
    }
    std::strncpy(full_path, path, kMaxPath - 1);  // a name-only match still counts
    full_path[kMaxPath - 1] = '\0';
  }
  if (!patterns.needs_full_path() || patterns.matches(full_path, file_name_of(full_path))) return true;
  char physical[kMaxPath];
  if (!physical_path_of(full_path, physical) || std::strcmp(physical, full_path) == 0) return false;
  if (!patterns.matches(physical, file_name_of(physical))) return false;
  std::memcpy(full_path, physical, std::strlen(physical) + 1);
  return true;
}

void report_open_in_audit(const OpenRequest& request, const OpenDecision& decision, int fd, Description* d,
                          uint64_t size) {
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
  handle_violation(v);
}

// The mount refused the open we rewrote: say why the program sees this error, since it did not ask for
// these flags.
void explain_refused_rewrite(const OpenRequest& request, const OpenDecision& decision, int error) {
  if (error != EPERM && error != EOPNOTSUPP && error != EINVAL && error != ENOSYS) return;
  char effective[160];
  format_open_flags(decision.flags, effective, sizeof effective);
  char message[kMaxPath + 512];
  std::snprintf(message, sizeof message,
                "%s(\"%s\"): the filesystem refused the open as rewritten (%s) with %s: it does not append "
                "to existing files (mountpoint-s3 does so only with --incremental-upload on S3 Express One "
                "Zone); APPENDGUARD_REOPEN=rewrite writes such files anew instead; see docs/limits.md",
                request.function, decision.path, effective, errno_name(error));
  report_notice(message);
}

// The store refused what it was asked after appendguard changed the open: the program did not ask for
// these flags, so it must hear why it fails (once per description).
bool rewritten_open(const Description* d) {
  return d->site.original_flags != d->site.effective_flags;
}

// What a notice about a refused call needs of the description, copied while it is still ours.
struct RefusedCall {
  const char* path;
  int original_flags;
  int effective_flags;
  bool reused_session;
};

void explain_store_refusal(const char* operation, int fd, const RefusedCall& d, int error) {
  char original[160];
  char effective[160];
  format_open_flags(d.original_flags, original, sizeof original);
  format_open_flags(d.effective_flags, effective, sizeof effective);
  const bool appends = (d.effective_flags & O_APPEND) != 0;
  const char* rule =
      d.reused_session
          ? "the store refused the write session appendguard held open from the file's first open and "
            "handed back for this one (a store that commits a file on every flush, or a forked child "
            "closed its copy of the descriptor); APPENDGUARD_REOPEN=rewrite writes such files anew instead"
      : appends ? "the filesystem does not append to existing files (a write-once store: rclone "
                  "--vfs-cache-mode off, mountpoint-s3, gcsfuse streaming writes, whose rule is one upload "
                  "from offset 0 per file); APPENDGUARD_REOPEN=hold (the default on the stores it "
                  "recognises) keeps the file's first write session open for the reopen, and "
                  "APPENDGUARD_REOPEN=rewrite writes such files anew"
                : "the filesystem refused the file written anew; if it appends to existing files, "
                  "APPENDGUARD_REOPEN=append reopens them with O_APPEND instead";
  char message[kMaxPath + 900];
  std::snprintf(message, sizeof message,
                "%s: %s (fd %d) failed with %s on a descriptor appendguard opened %s (the program asked for "
                "%s): %s; see docs/stores.md",
                d.path, operation, fd, errno_name(error), effective, original, rule);
  InternalScope internal;
  report_notice(message);
}

void explain_refused_rewrite_by_truncation(const OpenRequest& request, const OpenDecision& decision,
                                           int error) {
  if (error != EPERM && error != EOPNOTSUPP && error != EINVAL && error != ENOSYS && error != EACCES) return;
  char effective[160];
  format_open_flags(decision.flags, effective, sizeof effective);
  char message[kMaxPath + 512];
  std::snprintf(message, sizeof message,
                "%s(\"%s\"): APPENDGUARD_REOPEN=rewrite reopens an existing file truncating it (%s) to write "
                "its bytes back, and the filesystem refused that with %s; the file is unchanged. A kernel "
                "append-only file (chattr +a) or a store that appends but cannot replace a file needs "
                "APPENDGUARD_REOPEN=append (the default); see docs/stores.md",
                request.function, decision.path, effective, errno_name(error));
  report_notice(message);
}

}  // namespace

// True the first time a store refusal is seen on `d` (whose open appendguard changed).
bool first_store_refusal(Description* d, int error) {
  if (!rewritten_open(d) || !is_store_refusal(error)) return false;
  return !(__atomic_fetch_or(&d->reported_once, kStoreRefusalReported, __ATOMIC_RELAXED) &
           kStoreRefusalReported);
}

void note_failed_guarded_call(const char* operation, int fd, Description* d, int error) {
  if (first_store_refusal(d, error)) {
    explain_store_refusal(
        operation, fd, {d->path, d->site.original_flags, d->site.effective_flags, d->reused_session}, error);
  }
  errno = error;
}

// ---------------------------------------------------------------- opening

void decide_open(const OpenRequest& request, OpenDecision& decision) {
  decision.guarded = false;
  decision.trace_only = false;
  decision.existed = false;
  decision.rewrite_existing = false;
  decision.exists = false;
  decision.hold = false;
  decision.reuse_fd = -1;
  decision.reuse_end = 0;
  decision.flags = request.flags;
  if (!request.path || InternalScope::active()) return;
  Mode mode = current_mode();
  if (mode == Mode::kOff) return;
  bool writes = is_write_open(request.flags);
  if (!writes && __builtin_expect(any_held_sessions(), 0))
    commit_held_before_read(request.dirfd, request.path);
  if (!writes && !g_config->trace) return;
  if (!matched_by_name(request.dirfd, request.path, decision.path)) {
    // Not by name: a write open on an append-only mount is guarded all the same.
    if (!writes || !any_append_only_mount()) return;
    if (!resolve_full_path(request.dirfd, request.path, decision.path)) return;
    if (!append_only_mount_of(decision.path)) return;
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
  decision.guarded = true;
  decision.exists = exists;
  if (mode == Mode::kEnforce) {
    HeldSession held;
    if (exists && take_held_for_open(st.st_dev, st.st_ino, request.flags, held)) {
      decision.reuse_fd = held.fd;
      decision.reuse_end = held.end_of_file;
      decision.flags = held.effective_flags;
      return;
    }
    if (exists) refresh_mounts_for(st.st_dev);  // a store mounted after start-up
    decision.hold = hold_mode_for(decision.path);
    decision.flags = rewrite_open_flags(request.flags);
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
  char flags_text[160];
  if (decision.trace_only || fd < 0) {
    if (fd < 0 && decision.rewrite_existing) {
      explain_refused_rewrite_by_truncation(request, decision, error);
    } else if (fd < 0 && decision.flags != request.flags) {
      explain_refused_rewrite(request, decision, error);
    }
    if (fd >= 0) forget_if_stale(fd);
    if (tracing()) {
      format_open_flags(request.flags, flags_text, sizeof flags_text);
      trace(request.function, fd, decision.path, fd, error, "flags=%s", flags_text);
    }
    errno = error;
    return fd;
  }
  // A vfork child shares our memory: its descriptors must not enter the parent's table (after its exec
  // they are carried like any other).
  if (!owns_file_table()) {
    errno = error;
    return fd;
  }
  struct stat64 st;
  if (real_fstat64(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    forget_if_stale(fd);  // a device or FIFO that happens to match: not a file we can reason about
    errno = error;
    return fd;
  }
  bool decision_hold_after_open = false;
  OpenSite site;
  site.function = request.function;
  site.original_flags = request.flags;
  site.effective_flags = decision.flags;
  site.written_back = decision.written_back;
  site.reused_held = decision.reuse_fd >= 0;
  site.pid = static_cast<pid_t>(syscall(SYS_getpid));
  site.tid = gettid_raw();
  site.frame_count = capture_open_site(site.frames, kOpenFrames);

  OpenRecord record;
  record.path = decision.path;
  record.device = st.st_dev;
  record.inode = st.st_ino;
  record.size = static_cast<uint64_t>(st.st_size);
  record.truncated = (decision.flags & O_TRUNC) != 0;
  record.kernel_appends = (decision.flags & O_APPEND) != 0;
  record.program_appends = (request.flags & O_APPEND) != 0;
  record.readable_by_program = (request.flags & O_ACCMODE) == O_RDWR;
  // A new file's store is known only now (its device): decide_open could not refresh the mounts for it.
  if (g_config->mode == Mode::kEnforce && decision.reuse_fd < 0 && !decision.hold) {
    refresh_mounts_for(st.st_dev);
    decision_hold_after_open = hold_mode_for(decision.path);
  }
  record.starts_session = (decision.hold || decision_hold_after_open) &&
                          ((decision.flags & O_TRUNC) || (!decision.exists && (decision.flags & O_CREAT)));
  if (decision.reuse_fd >= 0) {
    // The held session: the kernel offset is at the end of what it wrote, and only writes there are
    // allowed, so the kernel places every allowed write at the end (as with O_APPEND); the program's
    // position is what its open promised.
    record.size = decision.reuse_end;
    record.truncated = false;
    record.kernel_appends = true;
    record.position = record.program_appends ? decision.reuse_end : 0;
    record.reused_session = true;
  }
  record.site = &site;
  Description* d = g_files.track(fd, record);
  if (!d) {
    char message[kMaxPath + 200];
    std::snprintf(message, sizeof message, "cannot track %s (fd %d): descriptor above %d or out of memory%s",
                  decision.path, fd, kMaxTrackedFd - 1,
                  g_config->mode == Mode::kEnforce ? "; the open fails with EMFILE" : "");
    report_notice(message);
    if (g_config->mode == Mode::kEnforce) {
      real_close(fd);
      errno = EMFILE;
      return -1;
    }
    errno = error;
    return fd;
  }
  count_event(g_summary.guarded_opens);
  if (decision.flags != request.flags) count_event(g_summary.rewritten_opens);
  if (g_config->mode == Mode::kAudit) report_open_in_audit(request, decision, fd, d, record.size);
  if (tracing()) {
    char effective_text[160];
    format_open_flags(request.flags, flags_text, sizeof flags_text);
    format_open_flags(decision.flags, effective_text, sizeof effective_text);
    trace(request.function, fd, decision.path, fd, 0, "flags=%s effective=%s size=%llu%s", flags_text,
          effective_text, static_cast<unsigned long long>(record.size),
          record.reused_session   ? " (held session reused)"
          : record.starts_session ? " (session held at close)"
                                  : "");
  }
  errno = error;
  return fd;
}

namespace {

bool guards_full_path(const char* full_path) {
  return g_config->paths.matches(full_path, file_name_of(full_path)) || append_only_mount_of(full_path);
}

}  // namespace

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
  }
  open_record.kernel_appends = kernel_appends;
  open_record.program_appends = (site.original_flags & O_APPEND) != 0;
  open_record.readable_by_program = (site.original_flags & O_ACCMODE) == O_RDWR;
  open_record.shares_offset = true;  // the process it came from may still hold it
  open_record.site = &site;
  return g_files.track(fd, open_record) != nullptr;
}

void adopt_received_descriptors(const char* operation, const msghdr* message) {
  if (!owns_file_table()) return;
  for (const cmsghdr* c = CMSG_FIRSTHDR(message); c;
       c = CMSG_NXTHDR(const_cast<msghdr*>(message), const_cast<cmsghdr*>(c))) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* data = CMSG_DATA(c);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, data + i * sizeof(int), sizeof fd);
      forget_if_stale(fd);
      if (adopt_if_guarded(fd, "recvmsg (SCM_RIGHTS)", nullptr, 0) && tracing()) {
        trace(operation, fd, g_files.lookup(fd)->path, fd, 0, "%s", "descriptor received (SCM_RIGHTS)");
      }
    }
  }
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

uint64_t write_fully(int fd, const char* data, uint64_t size, int& error) {
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = real_write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<uint64_t>(n);
  }
  return done;
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
                  "on a store that appends use APPENDGUARD_REOPEN=append; see docs/limits.md",
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

// ---------------------------------------------------------------- violations

Violation violation_on(const char* operation, int fd, const Description* d, uint64_t end_of_file,
                       const char* why) {
  Violation v;
  v.operation = operation;
  v.fd = fd;
  v.path = d->path;
  v.description = d;
  v.has_count = false;
  v.has_offset = false;
  v.end_of_file = end_of_file;
  v.why = why;
  return v;
}

bool handle_violation(Violation& v) {
  const bool audit = g_config->mode == Mode::kAudit;
  Action action = g_config->on_violation;
  if (audit) {
    v.outcome = action == Action::kAbort ? Outcome::kAborted : Outcome::kAuditOnly;
  } else {
    v.outcome = action == Action::kError   ? Outcome::kRefused
                : action == Action::kAbort ? Outcome::kAborted
                                           : Outcome::kLetThrough;
  }
  v.error = g_config->violation_errno;
  {
    InternalScope internal;
    report_violation(v);
  }
  if (action == Action::kAbort) abort();
  if (action == Action::kError && !audit) {
    errno = g_config->violation_errno;
    return false;
  }
  return true;
}

bool descriptor_path(int fd, char* out, size_t capacity) {
  char link[32];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, out, capacity - 1);
  if (n <= 0) return false;
  out[n] = '\0';
  return true;
}

bool refresh_shared_offset(int fd, Description* d, PositionState& state) {
  struct stat64 st;
  if (real_fstat64(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) > state.end_of_file) {
    state.end_of_file = static_cast<uint64_t>(st.st_size);  // the other process appended
    d->file->end_of_file = state.end_of_file;
  }
  off64_t offset = real_lseek64(fd, 0, SEEK_CUR);
  if (offset < 0 || static_cast<uint64_t>(offset) == state.position) return false;
  state.position = static_cast<uint64_t>(offset);
  d->position = state.position;
  return true;
}

bool refuse_or_report_write(const char* operation, int fd, Description* d, const WriteRequest& request,
                            const WriteCheck& check, uint64_t end_of_file, bool moved_by_another_process) {
  const char* why = moved_by_another_process && !request.has_offset
                        ? "the descriptor's offset, shared with another process (a fork, an inherited or a "
                          "received descriptor), was moved away from the end of file there; an append-only "
                          "mount accepts only appends"
                        : write_violation_reason(check.verdict, request);
  Violation v = violation_on(operation, fd, d, end_of_file, why);
  v.has_count = true;
  v.count = request.count;
  v.has_offset = true;
  v.offset = static_cast<int64_t>(check.intended_offset);
  v.landing_offset = check.landing_offset;
  if (handle_violation(v)) return true;
  int error = errno;
  if (tracing()) {
    trace_numbers(operation, fd, d->path, -1, error,
                  {trace_unsigned("bytes", request.count), trace_unsigned("offset", check.intended_offset),
                   trace_unsigned("end_of_file", end_of_file)},
                  " (refused)");
  }
  errno = error;
  return false;
}

void trace_write(const char* operation, int fd, const Description* d, const WriteRequest& request,
                 const WriteCheck& check, uint64_t end_of_file, ssize_t result) {
  int error = errno;
  trace_numbers(operation, fd, d->path, result, error,
                {trace_unsigned("bytes", request.count), trace_unsigned("offset", check.intended_offset),
                 trace_unsigned("end_of_file", end_of_file)});
  errno = error;
}

ssize_t refuse_write_from_interrupting_handler(const char* operation, int fd, Description* d,
                                               const WriteRequest& request) {
  Violation v =
      violation_on(operation, fd, d, d->file->end_of_file,
                   "a signal handler writes to the file whose write it interrupted; the interrupted "
                   "write has not recorded its bytes yet, so this one cannot be placed at the end");
  v.has_count = true;
  v.count = request.count;
  v.outcome = Outcome::kRefused;
  v.error = g_config->violation_errno;
  {
    InternalScope internal;
    report_violation(v);
  }
  errno = g_config->violation_errno;
  return -1;
}

// ---------------------------------------------------------------- copies

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
    size_t done = 0;
    while (done < static_cast<size_t>(got)) {
      ssize_t n = out_offset ? real_pwrite64(out_fd, buffer + done, got - done, *out_offset)
                             : real_write(out_fd, buffer + done, got - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error = n < 0 ? errno : EIO;
        break;
      }
      done += static_cast<size_t>(n);
      if (out_offset) *out_offset += n;
    }
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

// ---------------------------------------------------------------- descriptors

void note_duplicate(const char* operation, int old_fd, int new_fd) {
  if (new_fd < 0 || !owns_file_table()) return;
  Description* before = g_files.lookup(old_fd);
  g_files.alias(old_fd, new_fd);
  if (tracing() && before) trace(operation, new_fd, before->path, new_fd, 0, "from fd=%d", old_fd);
}

void note_close(int fd) {
  if (owns_file_table()) g_files.forget(fd);
}

int close_tracked(int fd) {
  // On FUSE mounts close reports what the flush of the data found (HDFS: the write errors, write-once
  // stores: a failed upload), so the trace shows its real result and a store's refusal of a descriptor
  // we reopened is explained. What both need is copied first: forgetting recycles the description.
  const bool traced = tracing();
  bool rewritten = false;
  char path[kMaxPath] = "";
  RefusedCall refused{path, 0, 0, false};
  if (Description* d = g_files.lookup(fd)) {
    if (d->starts_session && hold_instead_of_close(fd, d)) return 0;
    fill_reservation_before_close(fd, d);
    rewritten =
        rewritten_open(d) && !(__atomic_load_n(&d->reported_once, __ATOMIC_RELAXED) & kStoreRefusalReported);
    if (traced || rewritten) std::snprintf(path, sizeof path, "%s", d->path);
    refused.original_flags = d->site.original_flags;
    refused.effective_flags = d->site.effective_flags;
    refused.reused_session = d->reused_session;
  }
  note_close(fd);
  int result = real_close(fd);
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

void note_close_range(const char* operation, unsigned first, unsigned last) {
  if (!owns_file_table()) return;
  if (tracing()) {
    int highest = g_files.highest_fd();
    unsigned end = highest < 0 ? 0 : std::min(last, static_cast<unsigned>(highest));
    for (unsigned fd = first; highest >= 0 && fd <= end; ++fd) {
      if (Description* d = g_files.lookup(static_cast<int>(fd))) {
        trace(operation, static_cast<int>(fd), d->path, 0, 0, "closed by %s(%u, %u)", operation, first, last);
      }
    }
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

bool guarded_path(const char* path, char* full_path) {
  return guarded_path_at(AT_FDCWD, path, full_path);
}

bool guarded_path_at(int dirfd, const char* path, char* full_path) {
  if (!path || InternalScope::active() || current_mode() == Mode::kOff) return false;
  if (matched_by_name(dirfd, path, full_path)) return full_path[0] == '/';  // else: not resolvable
  return any_append_only_mount() && resolve_full_path(dirfd, path, full_path) &&
         append_only_mount_of(full_path);
}

int reuse_held_descriptor(const OpenRequest& request, const OpenDecision& decision) {
  int fd = decision.reuse_fd;
  real_fcntl(fd, F_SETFD, (request.flags & O_CLOEXEC) ? FD_CLOEXEC : 0);
  real_lseek64(fd, static_cast<off64_t>(decision.reuse_end), SEEK_SET);
  return fd;
}

// ---------------------------------------------------------------- reads and mappings

void note_read(const char* operation, int fd, Description* d, bool moves_position, ssize_t result,
               int error) {
  if (moves_position && result > 0) {
    if (HeldFile file(fd, d); file) d->position += static_cast<uint64_t>(result);
  }
  const bool enforce = g_config->mode == Mode::kEnforce;
  bool made_write_only =
      (d->site.original_flags & O_ACCMODE) == O_RDWR && (d->site.effective_flags & O_ACCMODE) == O_WRONLY;
  bool report = enforce ? made_write_only : d->readable_by_program;
  if (report && !(__atomic_fetch_or(&d->reported_once, kReadReported, __ATOMIC_RELAXED) & kReadReported)) {
    Violation v = violation_on(
        operation, fd, d, d->file->end_of_file,
        enforce ? "the program opened the file read-write and now reads it; appendguard made the handle "
                  "write-only for the append-only mount (only the first read of this descriptor is "
                  "reported)"
                : "the program reads a file it opened read-write; an append-only mount cannot read and "
                  "write one handle, and enforce mode makes it write-only so this read would fail with "
                  "EBADF (only the first read of this descriptor is reported)");
    v.outcome = enforce ? Outcome::kKernelRefuses : Outcome::kAuditOnly;
    v.error = error;
    InternalScope internal;
    report_violation(v);
  }
  if (tracing()) trace(operation, fd, d->path, result, error, "%s", "");
}

void note_mmap(const char* operation, int fd, Description* d, int prot, int flags, bool failed, int error) {
  bool shared_writable = (prot & PROT_WRITE) && (flags & MAP_TYPE) != MAP_PRIVATE;
  if (shared_writable &&
      !(__atomic_fetch_or(&d->reported_once, kMapReported, __ATOMIC_RELAXED) & kMapReported)) {
    Violation v = violation_on(operation, fd, d, d->file->end_of_file,
                               "a shared writable mapping writes anywhere in the file; an append-only mount "
                               "refuses it");
    v.outcome = g_config->mode == Mode::kAudit ? Outcome::kAuditOnly
                : failed                       ? Outcome::kKernelRefuses
                                               : Outcome::kLetThrough;
    v.error = error;
    InternalScope internal;
    report_violation(v);
  }
  if (tracing()) trace(operation, fd, d->path, failed ? -1 : 0, error, "prot=%d flags=%#x", prot, flags);
}

}  // namespace appendguard
