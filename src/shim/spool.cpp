#include "shim/spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/futex.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/errno_names.h"
#include "core/lock.h"
#include "core/rename_plan.h"
#include "core/write_all.h"
#include "report/report.h"
#include "report/site_stack.h"
#include "shim/guard_open.h"
#include "shim/guarded_paths.h"
#include "shim/held_file.h"
#include "shim/held_sessions.h"
#include "shim/mount_guard.h"
#include "shim/path_scratch.h"
#include "shim/real_io.h"
#include "shim/runtime.h"
#include "shim/signals_blocked_lock.h"
#include "shim/trace.h"

namespace appendguard {

constinit std::atomic<int> g_spool_entries{0};

namespace {

// One file spooled (or uploaded from a spool) by this process. The spool file itself is anonymous
// (O_TMPFILE, or unlinked at once): it disappears with its last descriptor, whatever ends the process.
struct SpoolEntry {
  bool used = false;
  bool open = false;  // the spool file still has descriptors here
  pid_t owner = 0;
  dev_t device = 0;  // the spool file's
  ino_t inode = 0;
  char* store_path = nullptr;  // the name the program created (malloc'ed)
  char* target = nullptr;      // where a rename sent it (malloc'ed), or null
  uint64_t uploaded = 0;       // bytes uploaded by the last upload
  uint64_t order = 0;          // for replacing the oldest closed entry
};

constexpr size_t kMaxEntries = 64;
constinit SpoolEntry g_entries[kMaxEntries] = {};
constinit Lock g_lock;
constinit uint64_t g_order = 0;
constinit std::atomic<bool> g_swept{false};

// The registry's lock with every signal blocked (a handler may open or close a guarded file).
class SpoolGuard {
 public:
  SpoolGuard() : lock_(g_lock) {}

 private:
  SignalsBlockedLock lock_;
};

const char* spool_dir() {
  if (!g_config->spool_dir.empty()) return g_config->spool_dir.c_str();
  const char* tmp = getenv("TMPDIR");
  return tmp && tmp[0] == '/' ? tmp : "/tmp";
}

void say(const char* text) {
  int error = errno;
  InternalScope internal;
  report_notice(text);
  errno = error;
}

// Named spool files exist only where O_TMPFILE is refused, for the instant between their creation and
// their unlink: a process killed there leaves one, removed by the next process that spools there.
constexpr char kNamedPrefix[] = "appendguard-spool-";

void sweep_named_leftovers(const char* dir) {
  if (g_swept.exchange(true, std::memory_order_relaxed)) return;
  DIR* d = opendir(dir);
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, kNamedPrefix, sizeof kNamedPrefix - 1) != 0) continue;
    long pid = std::strtol(e->d_name + sizeof kNamedPrefix - 1, nullptr, 10);
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      real_unlinkat(dirfd(d), e->d_name, 0);
  }
  closedir(d);
}

int create_spool_file(const char* dir, int cloexec) {
  int fd = real_open(dir, O_TMPFILE | O_RDWR | cloexec, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
  sweep_named_leftovers(dir);
  static std::atomic<unsigned> counter{0};
  char name[kMaxPath];
  std::snprintf(name, sizeof name, "%s/%s%d-%u", dir, kNamedPrefix, static_cast<int>(raw_getpid()),
                counter.fetch_add(1, std::memory_order_relaxed));
  fd = real_open(name, O_RDWR | O_CREAT | O_EXCL | cloexec, 0600);
  if (fd >= 0) real_unlink(name);
  return fd;
}

SpoolEntry* entry_by_file(dev_t device, ino_t inode) {
  for (SpoolEntry& e : g_entries) {
    if (e.used && e.open && e.device == device && e.inode == inode) return &e;
  }
  return nullptr;
}

SpoolEntry* entry_by_store_path(const char* path, bool open_only) {
  for (SpoolEntry& e : g_entries) {
    if (e.used && (e.open || !open_only) && e.store_path && std::strcmp(e.store_path, path) == 0) return &e;
  }
  return nullptr;
}

void free_entry(SpoolEntry& e) {
  std::free(e.store_path);
  std::free(e.target);
  e = SpoolEntry{};
  g_spool_entries.fetch_sub(1, std::memory_order_relaxed);
}

// Files written here on a store without rename and closed: (device, inode), the last kRemembered.
constexpr size_t kRemembered = 64;
struct WrittenFile {
  dev_t device;
  ino_t inode;
};
constinit WrittenFile g_written[kRemembered] = {};
constinit size_t g_written_next = 0;

bool was_written_here(dev_t device, ino_t inode) {
  SpoolGuard guard;
  for (const WrittenFile& w : g_written) {
    if (w.inode == inode && w.device == device && inode != 0) return true;
  }
  return false;
}

// ---- The upload: a child process sharing our memory, which a SIGKILL of the writer does not stop ----

struct UploadJob {
  int source_fd;               // read with pread from 0
  bool close_source;           // closed by the child once read (the copy's own descriptor), before the unlink
  uint64_t source_bytes;       // bytes read from the source
  uint64_t total;              // written in all (zeros after the source's bytes)
  int target_flags;            // O_WRONLY|O_CREAT|O_TRUNC, or O_EXCL for RENAME_NOREPLACE
  char target[kMaxPath];       // absolute
  char unlink_path[kMaxPath];  // absolute, "" for none: removed at the end (the copy's source, a placeholder)
  std::atomic<uint32_t> done;
  // The target's descriptor while the child writes it (-1 before its open and from just before its close),
  // and whether the source is still open: in the table the child shares with the program, so that the
  // program's thread aborts the upload and closes them when the child dies (abort_orphaned_upload).
  std::atomic<int> target_fd;
  std::atomic<bool> source_open;
  bool shared_table;  // false: the child took a table of its own (open_target at RLIMIT_NOFILE)
  int error;          // 0, or the errno of the failed step
  const char* step;   // "open", "read", "write", "close", "unlink", "upload process"
  uint64_t written;
  int killed_by;  // the signal that killed the child, 0 if none
};

constexpr size_t kChildStack = size_t{64} * 1024;
constexpr size_t kCopyBuffer = 1 << 20;

struct UploadMapping {
  UploadJob job;
  alignas(64) char buffer[kCopyBuffer];
  alignas(64) char stack[kChildStack];
};

// The target's open when the program's own descriptors fill RLIMIT_NOFILE (third adversarial round: a
// spooled file closed by a program at its limit failed EMFILE and was lost with its spool). This child
// has a copy of the program's limits and shares its descriptor table, so room is made here only: the soft
// limit raised to the hard one, else the child takes a table of its own (the program's thread can then no
// longer abort the upload if the child dies) and closes one copied descriptor that is neither the source
// nor on a FUSE filesystem (closing a copy of a store's descriptor would flush that file; POSIX locks
// belong to the table that took them, the program's). System calls through libc's syscall(): our hooks
// would change the program's file table in memory, which this child shares.
int open_target(UploadJob& job) {
  int target = real_openat(AT_FDCWD, job.target, job.target_flags, 0666);
  if (target >= 0 || errno != EMFILE) return target;
  struct rlimit limit;
  if (real_syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, nullptr, &limit) != 0) return target;
  if (limit.rlim_cur < limit.rlim_max) {
    const rlim_t soft = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (real_syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &limit, nullptr) == 0) {
      target = real_openat(AT_FDCWD, job.target, job.target_flags, 0666);
      if (target >= 0 || errno != EMFILE) return target;
    }
    limit.rlim_cur = soft;
  }
  if (real_syscall(SYS_unshare, CLONE_FILES) != 0) return target;
  job.shared_table = false;
  const long highest = limit.rlim_cur < (rlim_t{1} << 20) ? static_cast<long>(limit.rlim_cur) : long{1} << 20;
  for (long fd = 0; fd < highest; ++fd) {
    struct statfs fs;
    if (fd == job.source_fd || real_syscall(SYS_fstatfs, fd, &fs) != 0 || fs.f_type == FUSE_SUPER_MAGIC)
      continue;
    real_syscall(SYS_close, fd);
    return real_openat(AT_FDCWD, job.target, job.target_flags, 0666);
  }
  errno = EMFILE;
  return -1;
}

// An upload that cannot complete is aborted, so that a store which replaces a file only when an upload
// completes keeps the old one: a write out of order (mountpoint-s3: EINVAL, the upload aborted, and its
// close commits nothing; appendonlyfs s3 and volumes do the same), then the close.
void abort_upload(int target, uint64_t total) {
  const char byte = 0;
  real_syscall(SYS_pwrite64, target, &byte, 1, static_cast<off64_t>(total + 1));
}

// The target gets the source's mode and times: what a rename would have given it (the mode the program's
// open asked for, after the umask, and what it set with fchmod and futimens). A store that keeps no modes
// or times (mountpoint-s3) refuses or ignores them; nothing more can be done there.
void give_mode_and_times(int source, int target) {
  struct stat st;
  if (real_syscall(SYS_fstat, source, &st) != 0) return;
  real_syscall(SYS_fchmod, target, st.st_mode & 07777);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  real_syscall(SYS_utimensat, target, nullptr, times, 0);
}

int upload_child(void* arg) {
  auto* m = static_cast<UploadMapping*>(arg);
  UploadJob& job = m->job;
  syscall(SYS_prctl, PR_SET_NAME, "appendguard-up", 0, 0, 0);  // its own name in ps, not the program's
  auto fail = [&](const char* step, int error) {
    job.step = step;
    job.error = error ? error : EIO;
    return 1;
  };
  int target = open_target(job);
  int status = 0;
  if (target < 0) {
    status = fail("open", errno);
  } else {
    if (job.shared_table) job.target_fd.store(target, std::memory_order_release);
    uint64_t done = 0;
    while (done < job.total && status == 0) {
      size_t chunk = job.total - done < kCopyBuffer ? static_cast<size_t>(job.total - done) : kCopyBuffer;
      if (done < job.source_bytes) {
        if (job.source_bytes - done < chunk) chunk = static_cast<size_t>(job.source_bytes - done);
        ssize_t n = real_pread64(job.source_fd, m->buffer, chunk, static_cast<off64_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          status = fail("read", n == 0 ? EIO : errno);
          break;
        }
        chunk = static_cast<size_t>(n);
      } else {
        std::memset(m->buffer, 0, chunk);
      }
      const WriteAllResult wrote = write_all(chunk, [&](uint64_t at, uint64_t left) {
        return real_write(target, m->buffer + at, static_cast<size_t>(left));
      });
      if (!wrote.complete) status = fail("write", wrote.error_or_eio());
      done += wrote.written;
      job.written = done;
    }
    if (status == 0) {
      give_mode_and_times(job.source_fd, target);
    } else {
      abort_upload(target, job.total);  // a failed write leaves its prefix on a store that would commit it
    }
    job.target_fd.store(-1, std::memory_order_release);
    if (real_close(target) != 0 && status == 0) status = fail("close", errno);
  }
  if (job.close_source) {
    job.source_open.store(false, std::memory_order_release);
    real_close(job.source_fd);  // before the unlink: a store may refuse to unlink a file still open
  }
  if (status == 0 && job.unlink_path[0] && real_unlink(job.unlink_path) != 0 && errno != ENOENT)
    status = fail("unlink", errno);
  job.done.store(1, std::memory_order_release);
  syscall(SYS_futex, &job.done, FUTEX_WAKE, 1, nullptr, nullptr, 0);
  return status;
}

// The child died before it finished (killed: the OOM killer, a kill of the process group's members): the
// upload it left is aborted and its descriptors closed here, so that the store keeps the file it was to
// replace (or never shows a new one) where the store commits only a completed upload. Returns EIO.
int abort_orphaned_upload(UploadJob& job) {
  const int target = job.target_fd.exchange(-1, std::memory_order_acq_rel);
  if (target >= 0) {
    abort_upload(target, job.total);
    real_close(target);
  }
  if (job.source_open.exchange(false, std::memory_order_acq_rel)) real_close(job.source_fd);
  job.step = "upload process";
  job.error = EIO;
  return EIO;
}

// Runs the job in the child and waits for it. Returns 0, or the errno (job.step says which step).
int run_upload(UploadMapping* m) {
  // Resolved here: the child must not take the loader's lock.
  real_pread64(-1, nullptr, 0, 0);
  real_write(-1, nullptr, 0);
  real_close(-1);
  real_openat(-1, "", 0, 0);
  real_unlink("");
  m->job.done.store(0, std::memory_order_relaxed);
  m->job.target_fd.store(-1, std::memory_order_relaxed);
  m->job.source_open.store(m->job.close_source, std::memory_order_relaxed);
  m->job.shared_table = true;
  m->job.error = 0;
  m->job.step = "";
  m->job.written = 0;
  m->job.killed_by = 0;
  // Every signal blocked in the child (it shares our memory: the program's handlers must not run there).
  // It shares the descriptor table too: its death closes nothing (a close would complete the upload of a
  // prefix on a store that commits at a close, mountpoint-s3), and neither does a SIGKILL of the writer.
  int pid, clone_error;
  {
    AllSignalsBlocked blocked;
    pid = clone(upload_child, m->stack + kChildStack, CLONE_VM | CLONE_FILES | SIGCHLD, m);
    clone_error = errno;
  }
  if (pid < 0) {
    m->job.step = "start";
    return clone_error;
  }
  bool reaped = false;
  while (true) {
    int status;
    pid_t r = waitpid(pid, &status, 0);
    if (r == pid && WIFSIGNALED(status)) m->job.killed_by = WTERMSIG(status);
    if (r == pid) reaped = true;
    if (r == pid || (r < 0 && errno != EINTR)) break;
  }
  // Reaped by someone else (SIGCHLD ignored): the job says when it is done, or the child is gone.
  const struct timespec tick = {0, 50000000L};  // 50 ms
  while (!reaped && m->job.done.load(std::memory_order_acquire) == 0 && kill(pid, 0) == 0)
    syscall(SYS_futex, &m->job.done, FUTEX_WAIT, 0, &tick, nullptr, 0);
  if (m->job.done.load(std::memory_order_acquire) == 0) return abort_orphaned_upload(m->job);
  return m->job.error;
}

UploadMapping* map_upload() {
  void* p = mmap(nullptr, sizeof(UploadMapping), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<UploadMapping*>(p);
}

bool store_has(const char* path) {
  struct stat64 st;
  return fstatat64(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// The empty file open_spooled makes under a spooled file's name, so that an O_EXCL create of the name by
// another process fails EEXIST on the store: the name holds an empty regular file.
bool holds_placeholder(const char* path) {
  struct stat64 st;
  return fstatat64(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_size == 0;
}

[[gnu::noinline, gnu::cold]] void say_spool_dropped(const char* name) {
  char message[kMaxPath + 300];
  std::snprintf(
      message, sizeof message,
      "%s: the file this process created with O_EXCL and wrote in the spool was not uploaded: the store "
      "has another file of that name (written by another open of it), which stands; the close fails "
      "with EEXIST; see stores.md (man appendguard)",
      name);
  say(message);
}

void unmap_upload(UploadMapping* m) {
  munmap(m, sizeof(UploadMapping));
}

// Whether the store holding `path` keeps a file's old contents until an upload replacing it completes:
// the stores known not to rename (mountpoint-s3, appendonlyfs s3 and volumes) are object stores, where an
// object is replaced only by a completed upload; any other store may empty the file at the open.
bool keeps_old_until_complete(const char* path) {
  const MountTable* table = g_all_mounts.load(std::memory_order_acquire);
  return table && !table->renames_at(path);
}

void say_failed_upload(const char* what, const char* source, const UploadJob& job, int error,
                       bool replacing) {
  char why[160];
  if (job.killed_by != 0) {
    std::snprintf(why, sizeof why, "its upload process, appendguard-up, was killed by signal %d",
                  job.killed_by);
  } else if (std::strcmp(job.step, "upload process") == 0) {
    std::snprintf(why, sizeof why, "its upload process, appendguard-up, ended before the upload did");
  } else if (std::strcmp(job.step, "open") == 0 && (error == EPERM || error == EEXIST || error == EBUSY)) {
    std::snprintf(
        why, sizeof why,
        "the store does not let the file be replaced, as mountpoint-s3 without --allow-overwrite, or "
        "another process is writing it");
  } else {
    std::snprintf(why, sizeof why, "the store refused it");
  }
  const char* left = !replacing ? "the upload was aborted: a store that shows a file only once its upload "
                                  "completes has nothing under the name"
                     : keeps_old_until_complete(job.target)
                         ? "the upload was aborted: the store keeps the file that was there"
                         : "the upload was aborted, but this store may have emptied the file that was there";
  char message[3 * kMaxPath];
  std::snprintf(message, sizeof message,
                "%s: %s to %s failed at its %s with %s after %llu of %llu bytes (%s); %s; "
                "see stores.md (man appendguard)",
                source, what, job.target, job.step, errno_name(error),
                static_cast<unsigned long long>(job.written), static_cast<unsigned long long>(job.total), why,
                left);
  say(message);
}

// Before the first byte of an upload that replaces a file on a store not known to keep it until the upload
// completes: if the upload fails, the old file may be lost (said once per upload).
void say_replacing_unsafely(const char* source, const char* target) {
  char message[2 * kMaxPath + 300];
  std::snprintf(
      message, sizeof message,
      "%s: replacing %s by an upload on a store not known to keep a file until the upload replacing "
      "it completes (as mountpoint-s3 and Databricks volumes do): if this upload fails, the old file "
      "may be lost; see stores.md (man appendguard)",
      source, target);
  say(message);
}

// Uploads `source_fd` (`bytes`, then zeros up to `total`) to `target`. Returns 0 or the errno, said.
// `close_source`: the source is the copy's own descriptor, closed by the upload (before the unlink).
// What an upload is for: the trace's word, and the failure line's phrase.
struct UploadPurpose {
  const char* traced;
  const char* said;
};
constexpr UploadPurpose kForRename = {"renamed", "its upload from the spool for its rename"};
constexpr UploadPurpose kCopyForRename = {"copied", "its copy on the store for its rename"};
constexpr UploadPurpose kAtClose = {"closed, uploaded", "its upload from the spool at its close"};
constexpr UploadPurpose kAfterRename = {"written again after its rename, uploaded",
                                        "its upload from the spool of what was written after its rename"};

int upload(const UploadPurpose& what, const char* source, int source_fd, uint64_t bytes, uint64_t total,
           const char* target, unsigned rename_flags, const char* unlink_path, bool close_source = false) {
  UploadMapping* m = map_upload();
  if (!m) {
    if (close_source) real_close(source_fd);
    return ENOMEM;
  }
  UploadJob& job = m->job;
  job.source_fd = source_fd;
  job.close_source = close_source;
  job.source_bytes = bytes;
  job.total = total;
  job.target_flags = O_WRONLY | O_CREAT | O_CLOEXEC | ((rename_flags & RENAME_NOREPLACE) ? O_EXCL : O_TRUNC);
  std::snprintf(job.target, sizeof job.target, "%s", target);
  std::snprintf(job.unlink_path, sizeof job.unlink_path, "%s", unlink_path ? unlink_path : "");
  const bool replacing = !(rename_flags & RENAME_NOREPLACE) && store_has(target);
  if (replacing && !keeps_old_until_complete(target)) say_replacing_unsafely(source, target);
  int error = run_upload(m);
  if (error != 0) {
    say_failed_upload(what.said, source, job, error, replacing);
  } else if (tracing()) {
    trace("rename", source_fd, source, 0, 0, "%s to %s: %llu bytes written sequentially%s", what.traced,
          target, static_cast<unsigned long long>(total), unlink_path ? ", source removed" : "");
  }
  unmap_upload(m);
  return error;
}

// The bytes and reservation of the tracked spool file behind `fd`.
bool spool_sizes(int fd, uint64_t& end, uint64_t& total) {
  Description* d = g_files.lookup(fd);
  if (!d) return false;
  HeldFile file(fd, d);
  if (!file) return false;
  end = file->end_of_file;
  total = upload_size(file->end_of_file, file->reserved_size);
  return true;
}

enum class SpoolTrouble { kMissing, kFull, kUnusable };

// Out of line: its buffers are not in the open's frame (issue 24: small thread stacks).
[[gnu::noinline, gnu::cold]] void say_spool_unusable(const char* path, const char* dir, SpoolTrouble trouble,
                                                     int error) {
  char why[96];
  if (trouble == SpoolTrouble::kMissing) {
    std::snprintf(why, sizeof why, error == ENOENT ? "does not exist" : "cannot be reached (%s)",
                  errno_name(error));
  } else if (trouble == SpoolTrouble::kFull) {
    std::snprintf(why, sizeof why, "has less than 64 MiB free");
  } else {
    std::snprintf(why, sizeof why, "cannot be used (%s)", errno_name(error));
  }
  PathLease lease(2);
  char* message = lease.get(0);
  if (!message) return;
  std::snprintf(message, 2 * kMaxPath,
                "%s: the store does not rename, so a file created with O_EXCL is written to the spool "
                "(APPENDGUARD_SPOOL=%s) and uploaded once under its final name at the rename; the spool %s, "
                "so this file is written on the store and copied at its rename (its bytes uploaded twice); "
                "set APPENDGUARD_SPOOL to a local directory with room (APPENDGUARD_SPOOL=off chooses this "
                "without the line); see reference.md (man appendguard)",
                path, dir, why);
  say(message);
}

char* copy_string(const char* s) {
  size_t n = std::strlen(s) + 1;
  char* out = static_cast<char*>(std::malloc(n));
  if (out) std::memcpy(out, s, n);
  return out;
}

}  // namespace

void refuse_spool_on_a_store() {
  if (g_config->spool_off || g_config->spool_dir.empty()) return;
  struct statfs fs;
  if (statfs(g_config->spool_dir.c_str(), &fs) != 0 || fs.f_type != FUSE_SUPER_MAGIC) return;
  char message[kMaxPath + 300];
  const int length =
      std::snprintf(message, sizeof message,
                    "appendguard: APPENDGUARD_SPOOL=%s is on a FUSE file system (a store): the spool "
                    "must be a local directory (its files are uploaded to the store); accepted: a "
                    "local directory, or off\n",
                    g_config->spool_dir.c_str());
  if (length > 0) syscall(SYS_write, STDERR_FILENO, message, std::strlen(message));
  _exit(2);
}

void remember_closed_on_store(const Description* d) {
  // As the open found it (issue 27: every guarded close looked the mount up); an adopted descriptor's is
  // looked up. A store that renames (kYes) is the caller's test (close_tracked): not made again here.
  if (d->store_renames == StoreRenames::kUnknown) {
    const MountTable* table = g_all_mounts.load(std::memory_order_acquire);
    if (!table || table->renames_at({d->path, d->path_length})) return;
  }
  SpoolGuard guard;
  for (const WrittenFile& w : g_written) {
    if (w.inode == d->file->inode && w.device == d->file->device) return;
  }
  g_written[g_written_next++ % kRemembered] = {d->file->device, d->file->inode};
}

bool spools(const OpenRequest& request, const OpenDecision& decision) {
  // The flags first; the mount was looked up once for the whole open (decide_open: decision.facts).
  if (!spools_open(request.flags, current_mode() == Mode::kEnforce, false, g_config->spool_off)) return false;
  return decision.facts_table && !decision.facts.renames;  // looked up once, in decide_open
}

int open_spooled(const OpenRequest& request, OpenDecision& decision, int (*create)(void*, int),
                 void* create_context) {
  // O_EXCL: the name must be free on the store, and among this process's spooled files.
  struct stat64 st;
  if (fstatat64(AT_FDCWD, decision.path, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    errno = EEXIST;
    return -1;
  }
  {
    SpoolGuard guard;
    if (entry_by_store_path(decision.path, true)) {
      errno = EEXIST;
      return -1;
    }
  }
  // The directory must exist on the store, as the real open would need it.
  PathLease lease(1);  // not on the stack (shim/path_scratch.h)
  char* parent = lease.get(0);
  if (!parent) return kOpenOnStore;
  std::snprintf(parent, kMaxPath, "%s", decision.path);
  if (char* slash = std::strrchr(parent, '/'); slash && slash != parent) *slash = '\0';
  if (fstatat64(AT_FDCWD, parent, &st, 0) != 0) return -1;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  const char* dir = spool_dir();
  struct statvfs fs;
  const bool exists = statvfs(dir, &fs) == 0;
  const int missing = exists ? 0 : errno;
  const bool room = exists && spool_has_room(static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize, 0);
  int fd = room ? create_spool_file(dir, request.flags & O_CLOEXEC) : -1;
  if (fd < 0) {
    say_spool_unusable(
        decision.path, dir,
        exists ? (room ? SpoolTrouble::kUnusable : SpoolTrouble::kFull) : SpoolTrouble::kMissing,
        exists ? errno : missing);
    decision.spool = false;
    return kOpenOnStore;
  }
  // The name itself is created on the store, empty (the placeholder), with the program's flags' O_EXCL and
  // its mode: another process's O_EXCL create of it then fails EEXIST there, as without the library; and
  // the spool file takes the mode the store gave it (the open's mode after the umask), for the upload.
  const int placeholder = create(create_context, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC);
  if (placeholder < 0) {
    const int error = errno;
    real_close(fd);
    errno = error;
    return -1;
  }
  if (real_fstat64(placeholder, &st) == 0) real_syscall(SYS_fchmod, fd, st.st_mode & 07777);
  real_close(placeholder);
  decision.flags = O_RDWR | O_CREAT | O_EXCL | (request.flags & O_CLOEXEC);
  return fd;
}

void register_spooled(const char* store_path, dev_t device, ino_t inode) {
  SpoolGuard guard;
  SpoolEntry* slot = nullptr;
  SpoolEntry* oldest_closed = nullptr;
  for (SpoolEntry& e : g_entries) {
    if (!e.used) {
      slot = &e;
      break;
    }
    if (!e.open && (!oldest_closed || e.order < oldest_closed->order)) oldest_closed = &e;
  }
  if (!slot && oldest_closed) {
    free_entry(*oldest_closed);
    slot = oldest_closed;
  }
  if (!slot) return;  // 64 spooled files open at once: this one is uploaded at its close (below)
  slot->store_path = copy_string(store_path);
  if (!slot->store_path) return;
  slot->used = true;
  slot->open = true;
  slot->owner = raw_getpid();
  slot->device = device;
  slot->inode = inode;
  slot->order = ++g_order;
  g_spool_entries.fetch_add(1, std::memory_order_relaxed);
}

bool spool_room_for(int fd, Description* d, uint64_t size) {
  (void)fd;
  {
    SpoolGuard guard;
    if (!entry_by_file(d->file->device, d->file->inode)) return true;
  }
  const char* dir = spool_dir();
  struct statvfs fs;
  if (statvfs(dir, &fs) != 0) return true;
  const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (spool_has_room(free_bytes, size)) return true;
  PathLease lease(2);  // not on the stack (shim/path_scratch.h)
  char* message = lease.get(0);
  if (!message) return false;
  std::snprintf(message, 2 * kMaxPath,
                "%s: the program reserves %llu bytes for a file the library spools (APPENDGUARD_SPOOL=%s, "
                "%llu bytes free, 64 MiB kept free besides): the call fails with ENOSPC and nothing reaches "
                "the store; set APPENDGUARD_SPOOL to a local directory with room, or APPENDGUARD_SPOOL=off "
                "(the file is written on the store and copied at its rename); see reference.md "
                "(man appendguard)",
                d->path, static_cast<unsigned long long>(size), dir,
                static_cast<unsigned long long>(free_bytes));
  say(message);
  return false;
}

bool is_spooled(const Description* d) {
  SpoolGuard guard;
  return entry_by_file(d->file->device, d->file->inode) != nullptr;
}

void say_spool_full(const char* operation, int fd, const Description* d) {
  PathLease lease(2);  // not on the stack (shim/path_scratch.h)
  char* message = lease.get(0);
  if (!message) return;
  std::snprintf(
      message, 2 * kMaxPath,
      "%s: %s (fd %d) failed: the spool (APPENDGUARD_SPOOL=%s) is full (the bytes written before stay "
      "there until the file's rename or close). Set APPENDGUARD_SPOOL to a local directory with room "
      "for the files written at once, or APPENDGUARD_SPOOL=off (written on the store and copied at "
      "the rename); see reference.md (man appendguard)",
      d->path, operation, fd, spool_dir());
  say(message);
}

bool rename_spooled_source(int old_dirfd, const char* old_path, int new_dirfd, const char* new_path,
                           unsigned flags, int& result) {
  if (!old_path || !new_path || !owns_file_table()) return false;
  PathLease lease(2);
  char* old_full = lease.get(0);
  char* new_full = lease.get(1);
  if (!old_full || !new_full || !resolve_full_path(old_dirfd, old_path, old_full)) return false;
  dev_t device = 0;
  ino_t inode = 0;
  {
    SpoolGuard guard;
    SpoolEntry* e = entry_by_store_path(old_full, true);
    if (!e || e->owner != raw_getpid()) return false;
    device = e->device;
    inode = e->inode;
  }
  // The program made a file of that name on the store by another open (tempfile's name passed to a
  // writer): that file is the source, not the spool (the real rename, then the copy, take it).
  if (store_has(old_full) && !holds_placeholder(old_full)) return false;
  InternalScope internal;
  RenameFacts facts;
  facts.source = RenameSource::kSpooled;
  facts.flags = flags;
  int error = 0;
  int fd = -1;
  if (!resolve_full_path(new_dirfd, new_path, new_full)) {
    error = errno ? errno : ENAMETOOLONG;
  } else if (plan_rename(facts) != RenamePlan::kUpload) {
    error = EINVAL;
  } else if (g_files.descriptors_of_file(device, inode, &fd, 1) == 0) {
    error = EBADF;  // not reached: an open entry has descriptors
  }
  uint64_t end = 0;
  uint64_t total = 0;
  if (error == 0 && !spool_sizes(fd, end, total)) error = EBADF;
  // The placeholder under the source name (open_spooled) goes once the file is under the target.
  if (error == 0)
    error = upload(kForRename, old_full, fd, end, total, new_full, flags,
                   holds_placeholder(old_full) ? old_full : nullptr);
  if (error == 0) {
    SpoolGuard guard;
    if (SpoolEntry* e = entry_by_file(device, inode)) {
      std::free(e->target);
      e->target = copy_string(new_full);
      e->uploaded = total;
      std::free(e->store_path);  // the source name is gone, as after a rename
      e->store_path = copy_string(new_full);
    }
  }
  result = error == 0 ? 0 : -1;
  errno = error;
  return true;
}

bool carry_out_refused_rename(int old_dirfd, const char* old_path, int new_dirfd, const char* new_path,
                              unsigned flags, int error, int& result) {
  if (!old_path || !new_path || current_mode() != Mode::kEnforce || InternalScope::active() ||
      !owns_file_table())
    return false;
  PathLease lease(2);
  char* old_full = lease.get(0);
  char* new_full = lease.get(1);
  if (!old_full || !new_full || !resolve_full_path(old_dirfd, old_path, old_full) ||
      !resolve_full_path(new_dirfd, new_path, new_full))
    return false;
  struct stat64 st;
  if (fstatat64(AT_FDCWD, old_full, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return false;
  const MountTable* table = g_all_mounts.load(std::memory_order_acquire);
  RenameFacts facts;
  facts.error = error;
  facts.flags = flags;
  facts.store_renames = !table || (table->renames_at(old_full) && table->renames_at(new_full));
  bool written = g_files.tracks_file(st.st_dev, st.st_ino) || was_written_here(st.st_dev, st.st_ino);
  if (!written) {
    SpoolGuard guard;
    written = entry_by_store_path(old_full, false) != nullptr;  // uploaded from the spool at its close
  }
  // Its held write session (the program closed it: DCP's .metadata.tmp) is committed first.
  if (commit_held_file(st.st_dev, st.st_ino, "before appendguard copied it for a rename the store refused"))
    written = true;
  facts.source = written ? RenameSource::kWritten : RenameSource::kUnknown;
  if (plan_rename(facts) != RenamePlan::kCopy) return false;
  InternalScope internal;
  // Still open for writing here (safetensors renames before its close; a spool without room put it on the
  // store): its upload is ended first, as a store that cannot read a file while it is written needs
  // (mountpoint-s3: EPERM for the read open). An fsync ends it there and is harmless elsewhere; the
  // program's writes to it after its rename would fail on such a store.
  int open_here = -1;
  if (g_files.descriptors_of_file(st.st_dev, st.st_ino, &open_here, 1) > 0) real_fsync(open_here);
  int source = real_openat(AT_FDCWD, old_full, O_RDONLY | O_CLOEXEC, 0);
  int copy_error = 0;
  if (source < 0) {
    copy_error = errno;
    char message[2 * kMaxPath + 400];
    std::snprintf(message, sizeof message,
                  "%s: the store refused the rename to %s (%s) and appendguard could not read the file back "
                  "to copy it (%s: a store that cannot read a file while it is written, such as "
                  "mountpoint-s3, needs it closed first, or written through the spool, APPENDGUARD_SPOOL); "
                  "both files are as they were; see stores.md (man appendguard)",
                  old_full, new_full, errno_name(error), errno_name(copy_error));
    say(message);
  } else {
    struct stat64 now;
    uint64_t size = real_fstat64(source, &now) == 0 ? static_cast<uint64_t>(now.st_size) : 0;
    uint64_t end = 0;
    if (g_files.end_of_file_of(st.st_dev, st.st_ino, end) && end > size) size = end;
    copy_error = upload(kCopyForRename, old_full, source, size, size, new_full, flags, old_full, true);
  }
  {
    SpoolGuard guard;
    if (copy_error == 0) {
      if (SpoolEntry* e = entry_by_store_path(old_full, false)) {
        std::free(e->store_path);
        e->store_path = copy_string(new_full);
      }
    }
  }
  result = copy_error == 0 ? 0 : -1;
  errno = copy_error == 0 ? 0 : copy_error;
  return true;
}

bool unlink_spooled_name(int dirfd, const char* path) {
  if (!path || !owns_file_table()) return false;
  PathLease lease(1);
  char* full = lease.get(0);
  if (!full || !resolve_full_path(dirfd, path, full)) return false;
  SpoolGuard guard;
  SpoolEntry* e = entry_by_store_path(full, true);
  if (!e || e->owner != raw_getpid()) return false;
  std::free(e->store_path);
  e->store_path = nullptr;  // no name: nothing uploaded at its close
  std::free(e->target);
  e->target = nullptr;
  if (holds_placeholder(full)) real_unlink(full);
  return true;
}

int upload_spooled_at_close(int fd, Description* d) {
  dev_t device = d->file->device;
  ino_t inode = d->file->inode;
  char* name = nullptr;
  bool renamed = false;
  uint64_t uploaded = 0;
  {
    SpoolGuard guard;
    SpoolEntry* e = entry_by_file(device, inode);
    if (!e || e->owner != raw_getpid() || !e->store_path) return 0;
    name = copy_string(e->target ? e->target : e->store_path);
    renamed = e->target != nullptr;
    uploaded = e->uploaded;
  }
  if (!name) return 0;
  uint64_t end = 0;
  uint64_t total = 0;
  int error = 0;
  // Never renamed, and the store has a file of that name other than the placeholder (the program, or
  // another, wrote it by another open of the name): that file stands, and the close fails, said.
  // A spool that holds nothing drops nothing (the program wrote the file by name: tempfile's name passed
  // to a writer).
  const bool replaced_on_store = !renamed && store_has(name) && !holds_placeholder(name);
  const bool sized = spool_sizes(fd, end, total);
  if (replaced_on_store) {
    if (sized && total > 0) {
      error = EEXIST;
      run_on_site_stack([&] { say_spool_dropped(name); });
    }
  } else if (sized && !renamed && total == 0 && holds_placeholder(name)) {
    // Nothing written: the placeholder is the empty file the program made.
  } else if (sized && (!renamed || total != uploaded)) {
    InternalScope internal;
    // Never renamed: a new file, as the program created it (O_EXCL: never over a file made meanwhile; its
    // placeholder removed first). On the thread's site stack, as the rename's store paths
    // (hooks_rename.cpp): a close in a small thread.
    if (!renamed && holds_placeholder(name)) real_unlink(name);
    error = run_on_site_stack([&] {
      return upload(renamed ? kAfterRename : kAtClose, name, fd, end, total, name,
                    renamed ? 0 : RENAME_NOREPLACE, nullptr);
    });
  }
  {
    SpoolGuard guard;
    if (SpoolEntry* e = entry_by_file(device, inode)) {
      e->open = false;
      e->uploaded = total;
    }
  }
  std::free(name);
  if (error != 0) errno = error;
  return error == 0 ? 0 : -1;
}

void reset_spool_after_fork_child() {
  g_lock.reset_in_child();
}

void upload_spooled_at_exit() {
  if (!any_spooled() || !owns_file_table()) return;
  for (size_t i = 0; i < kMaxEntries; ++i) {
    dev_t device;
    ino_t inode;
    {
      SpoolGuard guard;
      SpoolEntry& e = g_entries[i];
      if (!e.used || !e.open || e.owner != raw_getpid()) continue;
      device = e.device;
      inode = e.inode;
    }
    int fd = -1;
    if (g_files.descriptors_of_file(device, inode, &fd, 1) == 0) continue;
    if (Description* d = g_files.lookup(fd)) upload_spooled_at_close(fd, d);
  }
}

}  // namespace appendguard
