#define FUSE_USE_VERSION 312

#include "fuse_filesystem.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fuse.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/write_all.h"
#include "fault_injector.hpp"
#include "file_registry.hpp"
#include "profile_rules.hpp"

namespace appendonlyfs {

namespace {

struct Mount {
  const Options& options;
  int backing_fd;
  EventLog& log;
  FaultInjector faults;
  FileRegistry files;
};

struct Handle {
  int fd = -1;
  std::shared_ptr<FileLock> file;
  HandleState state;             // guarded by file->mutex, like the fields below
  pid_t open_process = 0;        // the thread group that opened it
  bool counted = false;          // counted in file->open (the busy rule)
  bool flushed = false;          // a flush came and no write since
  std::uint64_t flushed_at = 0;  // file->opens at that flush
  std::string replaces;          // staged upload (HandleRules::replaces_at_completion): the path it replaces
  bool upload_failed = false;    // a write was refused or failed: a staged upload is never completed
};

Mount& mount() {
  return *static_cast<Mount*>(fuse_get_context()->private_data);
}

Handle& handle(const fuse_file_info* fi) {
  return *reinterpret_cast<Handle*>(fi->fh);
}

// FUSE paths are absolute within the mount; the backing directory is addressed with *at() calls.
const char* relative(const char* path) {
  return path[1] == '\0' ? "." : path + 1;
}

const char* shown(const char* path) {
  return path ? path : "(unlinked)";
}

std::string_view profile_text() {
  return profile_name(mount().options.profile);
}

int errno_result(int result) {
  return result < 0 ? -errno : result;
}

// The backing file at `path` (a FUSE path), opened beneath the backing directory and through no
// symlink: the kernel sends paths it has resolved itself, so a symlink met on the way is a name swapped
// under us (a race another user of the mount can run), never something for this daemon to follow.
int open_backing(const char* path, int flags, mode_t mode) {
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode & 07777 : 0;  // no type bits
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, mount().backing_fd, relative(path), &how, sizeof how));
}

// The directory holding a FUSE path's last name (opened as open_backing opens) and that name, for the
// *at() calls that act on a name.
class Entry {
 public:
  explicit Entry(const char* path) {
    const std::string_view rel = relative(path);
    const std::size_t slash = rel.rfind('/');
    if (slash == std::string_view::npos) {
      dir_ = mount().backing_fd;
      name_ = std::string(rel);
      return;
    }
    name_ = std::string(rel.substr(slash + 1));
    dir_ = open_backing(("/" + std::string(rel.substr(0, slash))).c_str(), O_PATH | O_DIRECTORY, 0);
    owned_ = true;
    error_ = dir_ < 0 ? errno : 0;
  }
  ~Entry() {
    if (owned_ && dir_ >= 0) ::close(dir_);
  }
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;
  int dir() const { return dir_; }
  const char* name() const { return name_.c_str(); }
  int error() const { return error_; }

 private:
  int dir_ = -1;
  bool owned_ = false;
  int error_ = 0;
  std::string name_;
};

// A new file, directory, node or symlink belongs to the user whose request made it, as on a kernel file
// system (its group: the directory's when that is set-group-id, else the requester's). Only a daemon
// run as root can give files away; a user's own mount keeps them its own.
void give_to_requester(const Entry& entry, int fd) {
  if (::geteuid() != 0) return;
  const fuse_context* context = fuse_get_context();
  gid_t gid = context->gid;
  struct stat parent {};
  if (::fstat(entry.dir(), &parent) == 0 && (parent.st_mode & S_ISGID)) gid = parent.st_gid;
  if (fd >= 0) {
    (void)::fchown(fd, context->uid, gid);
  } else {
    (void)::fchownat(entry.dir(), entry.name(), context->uid, gid, AT_SYMLINK_NOFOLLOW);
  }
}

// An *at() call on a path's entry: -errno when its directory could not be opened.
template <typename Call>
int at_entry(const char* path, Call&& call) {
  const Entry entry(path);
  if (entry.error()) return -entry.error();
  return errno_result(call(entry));
}

void log_refused_open(const char* path, int flags, const StoreOpenDecision& decision) {
  mount().log.write(LogLine("refused", "open")
                        .field("path", path)
                        .field("flags", open_flags_text(flags))
                        .error(decision.error)
                        .field("profile", profile_text())
                        .field("reason", decision.reason));
}

// The thread group of the thread `pid` that sent a request (FUSE passes the thread's id), as
// mountpoint-s3 compares them; the id itself when /proc does not say.
pid_t thread_group(pid_t pid) {
  char name[64];
  std::snprintf(name, sizeof name, "/proc/%d/status", static_cast<int>(pid));
  std::FILE* status = std::fopen(name, "re");
  if (!status) return pid;
  char line[256];
  pid_t group = pid;
  while (std::fgets(line, sizeof line, status)) {
    if (std::sscanf(line, "Tgid: %d", &group) == 1) break;
  }
  std::fclose(status);
  return group;
}

void count_handle(Handle& opened, bool counted) {
  if (opened.counted == counted) return;
  opened.counted = counted;
  unsigned& number =
      opened.state.kind == HandleKind::write ? opened.file->open.writers : opened.file->open.readers;
  number = counted ? number + 1 : number - 1;
}

int refuse_busy(const char* path, int flags, int error) {
  mount().log.write(LogLine("refused", "open")
                        .field("path", path)
                        .field("flags", open_flags_text(flags))
                        .error(error)
                        .field("profile", profile_text())
                        .field("reason", "busy"));
  return -error;
}

// A staged upload's file: unnamed, in the directory of the file it replaces (same file system).
int open_staging(const char* path, const struct stat& replaced) {
  std::string parent(path);
  parent = parent.substr(0, parent.rfind('/'));
  const int fd =
      open_backing(parent.empty() ? "/" : parent.c_str(), O_TMPFILE | O_RDWR, replaced.st_mode & 07777);
  if (fd >= 0 && ::geteuid() == 0) (void)::fchown(fd, replaced.st_uid, replaced.st_gid);  // the owner's still
  return fd;
}

// A staged upload completes: its file takes the place of the one it replaces. A failed one is dropped
// with its handle (aofs_release), and the old file stays.
void complete_staged(Handle& opened) {
  if (opened.replaces.empty() || opened.upload_failed) return;
  char proc[64];
  std::snprintf(proc, sizeof proc, "/proc/self/fd/%d", opened.fd);
  const Entry target(opened.replaces.c_str());
  if (!target.error()) {
    const std::string temporary =
        std::string(target.name()) + ".appendonlyfs-upload-" + std::to_string(opened.fd);
    ::unlinkat(target.dir(), temporary.c_str(), 0);
    if (::linkat(AT_FDCWD, proc, target.dir(), temporary.c_str(), AT_SYMLINK_FOLLOW) == 0 &&
        ::renameat(target.dir(), temporary.c_str(), target.dir(), target.name()) != 0)
      ::unlinkat(target.dir(), temporary.c_str(), 0);
  }
  opened.replaces.clear();
}

int open_with_rules(const char* path, fuse_file_info* fi, bool may_create, mode_t mode) {
  Mount& m = mount();
  if (const int error = profile_spec(m.options.profile).handles.sync_open_error;
      error && (fi->flags & O_DSYNC)) {
    // O_SYNC includes the O_DSYNC bit.
    m.log.write(LogLine("refused", "open")
                    .field("path", path)
                    .field("flags", open_flags_text(fi->flags))
                    .error(error)
                    .field("profile", profile_text())
                    .field("reason", "sync"));
    return -error;
  }
  struct stat status {};
  const Entry entry(path);
  if (entry.error()) return -entry.error();
  const bool exists = ::fstatat(entry.dir(), entry.name(), &status, AT_SYMLINK_NOFOLLOW) == 0;
  if (!exists && errno != ENOENT) return -errno;
  if (!exists && !may_create) return -ENOENT;
  if (exists && may_create && (fi->flags & O_EXCL)) return -EEXIST;

  const StoreOpenDecision decision = decide_open(
      m.options.profile, {fi->flags, exists, static_cast<std::uint64_t>(exists ? status.st_size : 0)},
      m.options.hdfs_open);
  if (decision.error != 0) {
    log_refused_open(path, fi->flags, decision);
    return -decision.error;
  }

  // The busy rule is checked before the open can truncate anything; a new file is checked after.
  std::shared_ptr<FileLock> file = exists ? m.files.acquire(status.st_dev, status.st_ino) : nullptr;
  std::unique_lock<std::mutex> file_guard;
  if (file) {
    file_guard = std::unique_lock(file->mutex);
    if (const int busy = busy_error(m.options.profile, decision.kind, file->open)) {
      return refuse_busy(path, fi->flags, busy);
    }
  }

  // The backing fd never has O_APPEND: every write goes to the offset the rules checked.
  const bool staged =
      exists && decision.truncate && profile_spec(m.options.profile).handles.replaces_at_completion;
  int flags = (fi->flags & (O_NOFOLLOW | O_SYNC | O_DSYNC)) | (decision.truncate && !staged ? O_TRUNC : 0);
  if (!exists) flags |= O_CREAT | (fi->flags & O_EXCL);
  int fd = -1;
  if (staged) {
    fd = open_staging(path, status);
  } else if (decision.kind == HandleKind::write) {
    fd = open_backing(path, flags | O_RDWR, mode);
    if (fd < 0 && errno == EACCES) fd = open_backing(path, flags | O_WRONLY, mode);
  } else {
    fd = open_backing(path, flags | O_RDONLY, mode);
  }
  if (fd < 0) return -errno;
  if (!exists) give_to_requester(entry, fd);
  if (::fstat(fd, &status) != 0) {
    const int error = errno;
    ::close(fd);
    return -error;
  }

  if (!file) {
    file = m.files.acquire(status.st_dev, status.st_ino);
    file_guard = std::unique_lock(file->mutex);
    if (const int busy = busy_error(m.options.profile, decision.kind, file->open)) {
      ::close(fd);
      return refuse_busy(path, fi->flags, busy);
    }
  }
  auto opened = std::make_unique<Handle>();
  opened->fd = fd;
  opened->file = file;
  opened->state.kind = decision.kind;
  if (staged) opened->replaces = path;
  const HandleRules& handles = profile_spec(m.options.profile).handles;
  if (handles.sealed_error != 0) opened->open_process = thread_group(fuse_get_context()->pid);
  ++file->opens;
  if (handles.busy_error != 0) count_handle(*opened, true);
  fi->fh = reinterpret_cast<std::uint64_t>(opened.release());
  // Writable handles bypass the page cache so each write reaches us with the kernel's offset and
  // size; read handles keep the page cache so that shared read-only mmap (safetensors) works.
  fi->direct_io = decision.kind == HandleKind::write;
  fi->keep_cache = 0;
  return 0;
}

void* aofs_init(fuse_conn_info* conn, fuse_config* config) {
  // No attribute/entry caching: the kernel takes the O_APPEND offset from its cached i_size, which is
  // refreshed by every LOOKUP/GETATTR reply, so it must never be served from a stale cache.
  config->attr_timeout = 0;
  config->entry_timeout = 0;
  config->negative_timeout = 0;
  config->kernel_cache = 0;
  config->auto_cache = 0;
  config->direct_io = 0;
  // -o unlink_open=rename: libfuse's default, an unlink of an open file renamed to .fuse_hiddenN (what a
  // store built on libfuse's high-level API does; one without rename then refuses the unlink).
  config->hard_remove =
      static_cast<const Mount*>(fuse_get_context()->private_data)->options.rename_open_unlinked ? 0 : 1;
  config->use_ino = 1;
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  // O_TRUNC must arrive with open(), not as a separate setattr, so the profiles can judge it.
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  return fuse_get_context()->private_data;
}

int aofs_getattr(const char* path, struct stat* status, fuse_file_info* fi) {
  if (fi) return errno_result(::fstat(handle(fi).fd, status));
  return at_entry(path,
                  [&](const Entry& e) { return ::fstatat(e.dir(), e.name(), status, AT_SYMLINK_NOFOLLOW); });
}

int aofs_access(const char* path, int mask) {
  return at_entry(path,
                  [&](const Entry& e) { return ::faccessat(e.dir(), e.name(), mask, AT_SYMLINK_NOFOLLOW); });
}

int aofs_readlink(const char* path, char* buffer, size_t size) {
  const Entry entry(path);
  if (entry.error()) return -entry.error();
  const ssize_t length = ::readlinkat(entry.dir(), entry.name(), buffer, size - 1);
  if (length < 0) return -errno;
  buffer[length] = '\0';
  return 0;
}

int aofs_mknod(const char* path, mode_t mode, dev_t device) {
  return at_entry(path, [&](const Entry& e) {
    const int result = ::mknodat(e.dir(), e.name(), mode, device);
    if (result == 0) give_to_requester(e, -1);
    return result;
  });
}

int aofs_mkdir(const char* path, mode_t mode) {
  return at_entry(path, [&](const Entry& e) {
    const int result = ::mkdirat(e.dir(), e.name(), mode);
    if (result == 0) give_to_requester(e, -1);
    return result;
  });
}

int aofs_unlink(const char* path) {
  Mount& m = mount();
  if (const int error = profile_spec(m.options.profile).handles.unlink_written_error) {
    struct stat status {};
    const Entry entry(path);
    if (!entry.error() && ::fstatat(entry.dir(), entry.name(), &status, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISREG(status.st_mode)) {
      const std::shared_ptr<FileLock> file = m.files.acquire(status.st_dev, status.st_ino);
      std::lock_guard lock(file->mutex);
      if (file->open.writers > 0) {
        m.log.write(LogLine("refused", "unlink")
                        .field("path", path)
                        .error(error)
                        .field("profile", profile_text())
                        .field("reason", "being-written"));
        return -error;
      }
      return errno_result(::unlinkat(entry.dir(), entry.name(), 0));
    }
  }
  return at_entry(path, [&](const Entry& e) { return ::unlinkat(e.dir(), e.name(), 0); });
}

int aofs_rmdir(const char* path) {
  return at_entry(path, [&](const Entry& e) { return ::unlinkat(e.dir(), e.name(), AT_REMOVEDIR); });
}

int refuse_link(std::string_view operation, const char* from, const char* to, int error) {
  mount().log.write(LogLine("refused", operation)
                        .field("path", to)
                        .field("target", from)
                        .error(error)
                        .field("profile", profile_text()));
  return -error;
}

int aofs_symlink(const char* target, const char* path) {
  if (const int error = profile_spec(mount().options.profile).handles.link_error)
    return refuse_link("symlink", target, path, error);
  return at_entry(path, [&](const Entry& e) {
    const int result = ::symlinkat(target, e.dir(), e.name());
    if (result == 0) give_to_requester(e, -1);
    return result;
  });
}

int aofs_link(const char* from, const char* to) {
  Mount& m = mount();
  if (const int error = profile_spec(m.options.profile).handles.link_error)
    return refuse_link("link", from, to, error);
  const Entry source(from);
  const Entry link(to);
  if (source.error() || link.error()) return -(source.error() ? source.error() : link.error());
  return errno_result(::linkat(source.dir(), source.name(), link.dir(), link.name(), 0));
}

int aofs_rename(const char* from, const char* to, unsigned int flags) {
  Mount& m = mount();
  const Entry source(from);
  const Entry target(to);
  if (source.error() || target.error()) return -(source.error() ? source.error() : target.error());
  struct stat destination {};
  const bool onto_existing_file =
      ::fstatat(target.dir(), target.name(), &destination, AT_SYMLINK_NOFOLLOW) == 0 &&
      !S_ISDIR(destination.st_mode);
  const RenameDecision decision = decide_rename(m.options.profile, onto_existing_file);
  if (decision.error) {
    LogLine line("refused", "rename");
    line.field("path", from).field("to", to).error(decision.error).field("profile", profile_text());
    if (!decision.reason.empty()) line.field("reason", decision.reason);
    m.log.write(line);
    return -decision.error;
  }
  return errno_result(::renameat2(source.dir(), source.name(), target.dir(), target.name(), flags));
}

int aofs_chmod(const char* path, mode_t mode, fuse_file_info* fi) {
  if (fi) return errno_result(::fchmod(handle(fi).fd, mode));
  return at_entry(path,
                  [&](const Entry& e) { return ::fchmodat(e.dir(), e.name(), mode, AT_SYMLINK_NOFOLLOW); });
}

int aofs_chown(const char* path, uid_t uid, gid_t gid, fuse_file_info* fi) {
  if (fi) return errno_result(::fchown(handle(fi).fd, uid, gid));
  return at_entry(
      path, [&](const Entry& e) { return ::fchownat(e.dir(), e.name(), uid, gid, AT_SYMLINK_NOFOLLOW); });
}

int aofs_utimens(const char* path, const struct timespec times[2], fuse_file_info* fi) {
  if (fi) return errno_result(::futimens(handle(fi).fd, times));
  return at_entry(path,
                  [&](const Entry& e) { return ::utimensat(e.dir(), e.name(), times, AT_SYMLINK_NOFOLLOW); });
}

int truncate_backing(const char* path, const Handle* opened, off_t size) {
  if (opened && opened->state.kind == HandleKind::write) return errno_result(::ftruncate(opened->fd, size));
  const int fd = open_backing(path, O_WRONLY, 0);
  if (fd < 0) return -errno;
  const int result = errno_result(::ftruncate(fd, size));
  ::close(fd);
  return result;
}

int aofs_truncate(const char* path, off_t size, fuse_file_info* fi) {
  Mount& m = mount();
  Handle* opened = fi ? &handle(fi) : nullptr;
  struct stat status {};
  if (opened && ::fstat(opened->fd, &status) != 0) return -errno;
  if (!opened) {
    const int found = at_entry(
        path, [&](const Entry& e) { return ::fstatat(e.dir(), e.name(), &status, AT_SYMLINK_NOFOLLOW); });
    if (found != 0) return found;
  }
  const std::shared_ptr<FileLock> file =
      opened ? opened->file : m.files.acquire(status.st_dev, status.st_ino);
  std::lock_guard lock(file->mutex);
  if (opened && ::fstat(opened->fd, &status) != 0) return -errno;
  const auto current = static_cast<std::uint64_t>(status.st_size);
  const bool being_written =
      (opened && opened->state.kind == HandleKind::write && !opened->state.sealed) || file->open.writers > 0;
  const TruncateDecision decision = decide_truncate(m.options.profile, m.options.non_zero_truncate, current,
                                                    static_cast<std::uint64_t>(size), being_written);
  if (decision.error != 0 || decision.effect == TruncateEffect::skip) {
    LogLine line(decision.error != 0 ? "refused" : "ignored", "truncate");
    line.field("path", shown(path)).field("size", static_cast<std::uint64_t>(size)).field("end", current);
    if (decision.error != 0) line.error(decision.error);
    m.log.write(line.field("profile", profile_text()).field("reason", decision.reason));
    return -decision.error;
  }
  return truncate_backing(path, opened, size);
}

int aofs_open(const char* path, fuse_file_info* fi) {
  return open_with_rules(path, fi, false, 0);
}

int aofs_create(const char* path, mode_t mode, fuse_file_info* fi) {
  return open_with_rules(path, fi, true, mode);
}

int aofs_read(const char* path, char* buffer, size_t size, off_t offset, fuse_file_info* fi) {
  Handle& opened = handle(fi);
  const int error = profile_spec(mount().options.profile).handles.write_handle_read_error;
  if (error != 0 && opened.state.kind == HandleKind::write) {
    mount().log.write(LogLine("refused", "read")
                          .field("path", shown(path))
                          .field("offset", static_cast<std::uint64_t>(offset))
                          .field("size", static_cast<std::uint64_t>(size))
                          .error(error)
                          .field("profile", profile_text())
                          .field("reason", "write-handle"));
    return -error;
  }
  return static_cast<int>(errno_result(static_cast<int>(::pread(opened.fd, buffer, size, offset))));
}

ssize_t pwrite_fully(int fd, const char* buffer, std::size_t size, off_t offset) {
  return appendguard::write_all(size,
                                [&](std::uint64_t done, std::uint64_t left) {
                                  return ::pwrite(fd, buffer + done, left, offset + static_cast<off_t>(done));
                                })
      .as_write_result();
}

void log_fault(const char* path, off_t offset, std::size_t size, const FaultDecision& fault) {
  const std::string_view kind = fault.kind == FaultKind::eio      ? "eio"
                                : fault.kind == FaultKind::enospc ? "enospc"
                                                                  : "short";
  LogLine line("fault", kind);
  line.field("op", "write")
      .field("path", shown(path))
      .field("offset", static_cast<std::uint64_t>(offset))
      .field("size", static_cast<std::uint64_t>(size));
  if (fault.error != 0) {
    line.error(fault.error);
  } else {
    line.field("accepted", fault.accept);
  }
  mount().log.write(line.field("cause", fault.cause));
}

int aofs_write(const char* path, const char* buffer, size_t size, off_t offset, fuse_file_info* fi) {
  Mount& m = mount();
  Handle& opened = handle(fi);
  if (m.options.faults.delay_us != 0)
    std::this_thread::sleep_for(std::chrono::microseconds(m.options.faults.delay_us));

  std::lock_guard lock(opened.file->mutex);
  if (opened.flushed && !opened.state.sealed) {
    // mountpoint-s3: a write through a duplicate after the close takes the handle back, unless a newer
    // open took the file over (fs.rs write: EBADF "invalidated by a newer handle").
    if (opened.file->opens != opened.flushed_at) {
      m.log.write(LogLine("refused", "write")
                      .field("path", shown(path))
                      .error(EBADF)
                      .field("profile", profile_text())
                      .field("reason", "taken-over"));
      return -EBADF;
    }
    opened.flushed = false;
    count_handle(opened, true);
  }
  struct stat status {};
  if (::fstat(opened.fd, &status) != 0) return -errno;
  const StoreWriteRequest request{static_cast<std::uint64_t>(offset), size,
                                  static_cast<std::uint64_t>(status.st_size)};
  const StoreWriteDecision decision = decide_write(m.options.profile, opened.state, request);
  if (decision.error != 0) {
    if (decision.poison_handle) opened.state.poisoned = true;
    opened.upload_failed = true;
    m.log.write(LogLine("refused", "write")
                    .field("path", shown(path))
                    .field("offset", request.offset)
                    .field("size", request.size)
                    .field("end", decision.expected_offset)
                    .error(decision.error)
                    .field("profile", profile_text())
                    .field("reason", decision.reason));
    return -decision.error;
  }

  const FaultDecision fault = m.faults.before_write(size);
  if (fault.error != 0) {
    opened.upload_failed = true;
    log_fault(path, offset, size, fault);
    return -fault.error;
  }
  const ssize_t written = pwrite_fully(opened.fd, buffer, fault.accept, offset);
  const int write_error = errno;
  m.faults.after_write(fault, written < 0 ? 0 : static_cast<std::uint64_t>(written));
  if (written < 0) opened.upload_failed = true;
  if (written < 0) return -write_error;
  record_write(opened.state, request.offset, static_cast<std::uint64_t>(written));
  if (fault.kind == FaultKind::short_write) log_fault(path, offset, size, fault);
  return static_cast<int>(written);
}

int aofs_statfs(const char*, struct statvfs* status) {
  return errno_result(::fstatvfs(mount().backing_fd, status));
}

// The end of an upload (HandleRules): sealed handles refuse later writes and no longer count as busy.
void seal(Handle& opened) {
  opened.state.sealed = true;
  count_handle(opened, false);
  complete_staged(opened);
}

int aofs_flush(const char*, fuse_file_info* fi) {
  Mount& m = mount();
  if (m.options.faults.flush_eio) {
    std::lock_guard lock(handle(fi).file->mutex);
    handle(fi).upload_failed = true;
  }
  if (profile_spec(m.options.profile).handles.sealed_error == 0 && !handle(fi).replaces.empty()) {
    std::lock_guard lock(handle(fi).file->mutex);  // a store without the seal rule uploads at each close
    complete_staged(handle(fi));
  }
  if (profile_spec(m.options.profile).handles.busy_error != 0 ||
      profile_spec(m.options.profile).handles.sealed_error != 0) {
    Handle& opened = handle(fi);
    std::lock_guard lock(opened.file->mutex);
    const bool by_opener = thread_group(fuse_get_context()->pid) == opened.open_process;
    if (opened.state.kind == HandleKind::write &&
        flush_seals(m.options.profile, opened.state.written_end, by_opener)) {
      seal(opened);
    } else if (!opened.state.sealed) {
      // A reader's close, or a writer's that does not end the upload: the next open takes the file over.
      opened.flushed = true;
      opened.flushed_at = opened.file->opens;
      count_handle(opened, false);
    }
  }
  if (m.options.faults.flush_eio) return -EIO;
  // Emulates close() of the backing fd without giving up the handle (close() reports deferred errors).
  const int duplicate = ::dup(handle(fi).fd);
  if (duplicate < 0) return -errno;
  return errno_result(::close(duplicate));
}

int aofs_release(const char*, fuse_file_info* fi) {
  std::unique_ptr<Handle> opened(&handle(fi));
  {
    std::lock_guard lock(opened->file->mutex);
    count_handle(*opened, false);
    if (!opened->replaces.empty() && opened->upload_failed) {
      mount().log.write(LogLine("aborted", "upload")
                            .field("path", opened->replaces)
                            .field("profile", profile_text())
                            .field("reason", "failed-upload-keeps-old-file"));
    }
    complete_staged(*opened);
  }
  ::close(opened->fd);
  return 0;
}

int aofs_fsync(const char*, int datasync, fuse_file_info* fi) {
  Handle& opened = handle(fi);
  const int result = errno_result(datasync ? ::fdatasync(opened.fd) : ::fsync(opened.fd));
  if (result == 0 && opened.state.kind == HandleKind::write &&
      profile_spec(mount().options.profile).handles.sealed_error != 0) {
    std::lock_guard lock(opened.file->mutex);
    seal(opened);
  }
  return result;
}

int aofs_fallocate(const char* path, int mode, off_t offset, off_t length, fuse_file_info*) {
  Mount& m = mount();
  const int error = fallocate_error(m.options.profile);
  m.log.write(LogLine("refused", "fallocate")
                  .field("path", shown(path))
                  .field("offset", static_cast<std::uint64_t>(offset))
                  .field("size", static_cast<std::uint64_t>(length))
                  .field("mode", static_cast<std::uint64_t>(mode))
                  .error(error)
                  .field("profile", profile_text()));
  return -error;
}

int aofs_opendir(const char* path, fuse_file_info* fi) {
  const int fd = open_backing(path, O_RDONLY | O_DIRECTORY, 0);
  if (fd < 0) return -errno;
  DIR* directory = ::fdopendir(fd);
  if (!directory) {
    const int error = errno;
    ::close(fd);
    return -error;
  }
  fi->fh = reinterpret_cast<std::uint64_t>(directory);
  return 0;
}

int aofs_readdir(const char*, void* buffer, fuse_fill_dir_t fill, off_t, fuse_file_info* fi,
                 fuse_readdir_flags) {
  DIR* directory = reinterpret_cast<DIR*>(fi->fh);
  ::rewinddir(directory);
  while (dirent* entry = ::readdir(directory)) {
    struct stat status {};
    status.st_ino = entry->d_ino;
    status.st_mode = static_cast<mode_t>(DTTOIF(entry->d_type));
    if (fill(buffer, entry->d_name, &status, 0, static_cast<fuse_fill_dir_flags>(0)) != 0) break;
  }
  return 0;
}

int aofs_releasedir(const char*, fuse_file_info* fi) {
  ::closedir(reinterpret_cast<DIR*>(fi->fh));
  return 0;
}

fuse_operations make_operations() {
  fuse_operations ops{};
  ops.init = aofs_init;
  ops.getattr = aofs_getattr;
  ops.access = aofs_access;
  ops.readlink = aofs_readlink;
  ops.mknod = aofs_mknod;
  ops.mkdir = aofs_mkdir;
  ops.unlink = aofs_unlink;
  ops.rmdir = aofs_rmdir;
  ops.symlink = aofs_symlink;
  ops.link = aofs_link;
  ops.rename = aofs_rename;
  ops.chmod = aofs_chmod;
  ops.chown = aofs_chown;
  ops.utimens = aofs_utimens;
  ops.truncate = aofs_truncate;
  ops.open = aofs_open;
  ops.create = aofs_create;
  ops.read = aofs_read;
  ops.write = aofs_write;
  ops.statfs = aofs_statfs;
  ops.flush = aofs_flush;
  ops.release = aofs_release;
  ops.fsync = aofs_fsync;
  ops.fallocate = aofs_fallocate;
  ops.opendir = aofs_opendir;
  ops.readdir = aofs_readdir;
  ops.releasedir = aofs_releasedir;
  return ops;
}

std::vector<std::string> fuse_arguments(const Options& options) {
  std::vector<std::string> args = {"appendonlyfs", "-o",
                                   "fsname=appendonlyfs:" + std::string(profile_name(options.profile)), "-o",
                                   "subtype=appendonlyfs"};
  bool shared = false;
  bool checked = false;
  for (const std::string& option : options.fuse_options) {
    args.push_back("-o");
    args.push_back(option);
    shared = shared || option == "allow_other" || option == "allow_root";
    checked = checked || option == "default_permissions";
  }
  // A mount other users reach checks their access as a kernel file system does (the files have their
  // creators' owners and modes): without it, any user could read, append to or remove anyone's files.
  if (shared && !checked) args.insert(args.end(), {"-o", "default_permissions"});
  if (options.debug) args.push_back("-d");
  return args;
}

}  // namespace

int run_filesystem(const Options& options, EventLog& log) {
  const int backing_fd = ::open(options.backing.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (backing_fd < 0) {
    std::fprintf(stderr, "appendonlyfs: cannot open BACKING '%s': %s\n", options.backing.c_str(),
                 std::strerror(errno));
    return 2;
  }
  Mount state{options, backing_fd, log, FaultInjector(options.faults), {}};
  // The modes asked for are the modes made: the kernel has applied the requester's umask already.
  ::umask(0);

  std::vector<std::string> arg_strings = fuse_arguments(options);
  std::vector<char*> argv;
  argv.reserve(arg_strings.size());
  for (std::string& arg : arg_strings) argv.push_back(arg.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  const fuse_operations ops = make_operations();

  fuse* filesystem = fuse_new(&args, &ops, sizeof(ops), &state);
  if (!filesystem) {
    fuse_opt_free_args(&args);
    ::close(backing_fd);
    return 1;
  }
  int status = 1;
  if (fuse_mount(filesystem, options.mountpoint.c_str()) == 0) {
    if (fuse_daemonize(options.foreground ? 1 : 0) == 0 &&
        fuse_set_signal_handlers(fuse_get_session(filesystem)) == 0) {
      if (options.single_threaded) {
        status = fuse_loop(filesystem) == 0 ? 0 : 1;
      } else {
        fuse_loop_config* loop = fuse_loop_cfg_create();
        status = fuse_loop_mt(filesystem, loop) == 0 ? 0 : 1;
        fuse_loop_cfg_destroy(loop);
      }
      fuse_remove_signal_handlers(fuse_get_session(filesystem));
    }
    fuse_unmount(filesystem);
  }
  fuse_destroy(filesystem);
  fuse_opt_free_args(&args);
  ::close(backing_fd);
  return status;
}

}  // namespace appendonlyfs
