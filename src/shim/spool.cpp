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
  uint64_t source_bytes;       // bytes read from the source
  uint64_t total;              // written in all (zeros after the source's bytes)
  int target_flags;            // O_WRONLY|O_CREAT|O_TRUNC, or O_EXCL for RENAME_NOREPLACE
  char target[kMaxPath];       // absolute
  char unlink_path[kMaxPath];  // absolute, "" for none: the source on the store, removed at the end
  std::atomic<uint32_t> done;
  int error;         // 0, or the errno of the failed step
  const char* step;  // "open", "read", "write", "close", "unlink"
  uint64_t written;
};

constexpr size_t kChildStack = size_t{64} * 1024;
constexpr size_t kCopyBuffer = 1 << 20;

struct UploadMapping {
  UploadJob job;
  alignas(64) char buffer[kCopyBuffer];
  alignas(64) char stack[kChildStack];
};

// The target's open when the program's own descriptors fill RLIMIT_NOFILE (third adversarial round: a
// spooled file closed by a program at its limit failed EMFILE and was lost with its spool). This child has
// copies of the program's limits and descriptor table, so room is made here only: the soft limit raised to
// the hard one, else one copied descriptor closed that is neither the source nor on a FUSE filesystem
// (closing a copy of a store's descriptor would flush that file; POSIX locks belong to the table that took
// them, the program's). System calls through libc's syscall(): our hooks would change the program's table,
// which this child shares.
int open_target(const UploadJob& job) {
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
    if (real_close(target) != 0 && status == 0) status = fail("close", errno);
  }
  if (status == 0 && job.unlink_path[0] && real_unlink(job.unlink_path) != 0 && errno != ENOENT)
    status = fail("unlink", errno);
  job.done.store(1, std::memory_order_release);
  syscall(SYS_futex, &job.done, FUTEX_WAKE, 1, nullptr, nullptr, 0);
  return status;
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
  m->job.error = 0;
  m->job.step = "";
  m->job.written = 0;
  // Every signal blocked in the child (it shares our memory: the program's handlers must not run there).
  int pid, clone_error;
  {
    AllSignalsBlocked blocked;
    pid = clone(upload_child, m->stack + kChildStack, CLONE_VM | SIGCHLD, m);
    clone_error = errno;
  }
  if (pid < 0) {
    m->job.step = "start";
    return clone_error;
  }
  while (true) {
    int status;
    pid_t r = waitpid(pid, &status, 0);
    if (r == pid || (r < 0 && errno != EINTR)) break;
  }
  // Reaped by someone else (SIGCHLD ignored): the job says when it is done.
  while (m->job.done.load(std::memory_order_acquire) == 0)
    syscall(SYS_futex, &m->job.done, FUTEX_WAIT, 0, nullptr, nullptr, 0);
  return m->job.error;
}

UploadMapping* map_upload() {
  void* p = mmap(nullptr, sizeof(UploadMapping), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<UploadMapping*>(p);
}

void unmap_upload(UploadMapping* m) {
  munmap(m, sizeof(UploadMapping));
}

void say_failed_upload(const char* what, const char* source, const UploadJob& job, int error) {
  char message[3 * kMaxPath];
  std::snprintf(message, sizeof message,
                "%s: %s %s to %s failed at its %s with %s after %llu of %llu bytes (the store refused it%s); "
                "see docs/stores.md",
                source, what, job.unlink_path[0] ? "copying it on the store" : "uploading it from the spool",
                job.target, job.step, errno_name(error), static_cast<unsigned long long>(job.written),
                static_cast<unsigned long long>(job.total),
                std::strcmp(job.step, "open") == 0 && (error == EPERM || error == EEXIST)
                    ? ": a store that does not let a file be replaced, such as mountpoint-s3 without "
                      "--allow-overwrite, keeps the file that is there"
                    : "");
  say(message);
}

// Uploads `source_fd` (`bytes`, then zeros up to `total`) to `target`. Returns 0 or the errno, said.
int upload(const char* what, const char* source, int source_fd, uint64_t bytes, uint64_t total,
           const char* target, unsigned rename_flags, const char* unlink_path) {
  UploadMapping* m = map_upload();
  if (!m) return ENOMEM;
  UploadJob& job = m->job;
  job.source_fd = source_fd;
  job.source_bytes = bytes;
  job.total = total;
  job.target_flags = O_WRONLY | O_CREAT | O_CLOEXEC | ((rename_flags & RENAME_NOREPLACE) ? O_EXCL : O_TRUNC);
  std::snprintf(job.target, sizeof job.target, "%s", target);
  std::snprintf(job.unlink_path, sizeof job.unlink_path, "%s", unlink_path ? unlink_path : "");
  int error = run_upload(m);
  if (error != 0) {
    say_failed_upload(what, source, job, error);
  } else if (tracing()) {
    trace("rename", source_fd, source, 0, 0, "%s to %s: %llu bytes written sequentially%s", what, target,
          static_cast<unsigned long long>(total), unlink_path ? ", source removed" : "");
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

// Out of line: its buffers are not in the open's frame (issue 24: small thread stacks).
[[gnu::noinline, gnu::cold]] void say_spool_unusable(const char* path, const char* dir, bool room,
                                                     int error) {
  char why[96];
  if (room) {
    std::snprintf(why, sizeof why, "cannot be used (%s)", errno_name(error));
  } else {
    std::snprintf(why, sizeof why, "has less than 64 MiB free");
  }
  PathLease lease(2);
  char* message = lease.get(0);
  if (!message) return;
  std::snprintf(message, 2 * kMaxPath,
                "%s: the store does not rename, so a file created with O_EXCL is written to the spool "
                "(APPENDGUARD_SPOOL=%s) and uploaded once under its final name at the rename; the spool %s, "
                "so this file is written on the store and copied at its rename (its bytes uploaded twice); "
                "set APPENDGUARD_SPOOL to a local directory with room (APPENDGUARD_SPOOL=off chooses this "
                "without the line); see docs/reference.md",
                path, dir, why);
  say(message);
}

bool store_has(const char* path) {
  struct stat64 st;
  return fstatat64(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

char* copy_string(const char* s) {
  size_t n = std::strlen(s) + 1;
  char* out = static_cast<char*>(std::malloc(n));
  if (out) std::memcpy(out, s, n);
  return out;
}

}  // namespace

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

int open_spooled(const OpenRequest& request, OpenDecision& decision) {
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
  const bool room =
      statvfs(dir, &fs) == 0 && spool_has_room(static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize, 0);
  int fd = room ? create_spool_file(dir, request.flags & O_CLOEXEC) : -1;
  if (fd < 0) {
    say_spool_unusable(decision.path, dir, room, errno);
    decision.spool = false;
    return kOpenOnStore;
  }
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
                "(the file is written on the store and copied at its rename); see docs/reference.md",
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
      "the rename); see docs/reference.md",
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
  if (store_has(old_full)) return false;
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
  if (error == 0) error = upload("renamed", old_full, fd, end, total, new_full, flags, nullptr);
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
                  "both files are as they were; see docs/stores.md",
                  old_full, new_full, errno_name(error), errno_name(copy_error));
    say(message);
  } else {
    struct stat64 now;
    uint64_t size = real_fstat64(source, &now) == 0 ? static_cast<uint64_t>(now.st_size) : 0;
    uint64_t end = 0;
    if (g_files.end_of_file_of(st.st_dev, st.st_ino, end) && end > size) size = end;
    copy_error = upload("copied", old_full, source, size, size, new_full, flags, old_full);
    real_close(source);
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
  // Never renamed, and the store has the name (the program wrote it by another open of the name): that
  // file stands; the spool's bytes are not uploaded over it.
  const bool replaced_on_store = !renamed && store_has(name);
  if (!replaced_on_store && spool_sizes(fd, end, total) && (!renamed || total != uploaded)) {
    InternalScope internal;
    // Never renamed: a new file, as the program created it (O_EXCL: never over a file made meanwhile). On
    // the thread's site stack, as the rename's store paths (hooks_rename.cpp): a close in a small thread.
    error = run_on_site_stack([&] {
      return upload(renamed ? "written again after its rename, uploaded" : "closed, uploaded", name, fd, end,
                    total, name, renamed ? 0 : RENAME_NOREPLACE, nullptr);
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
