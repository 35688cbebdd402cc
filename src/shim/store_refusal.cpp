#include "shim/store_refusal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/vfs.h>

#include <cstdio>

#include "core/errno_names.h"
#include "core/open_flags.h"
#include "core/unguarded_failure.h"
#include "report/report.h"
#include "shim/append_only_attribute.h"
#include "shim/guarded_paths.h"
#include "shim/mount_guard.h"
#include "shim/path_scratch.h"
#include "shim/report_once.h"
#include "shim/runtime.h"
#include "shim/spool.h"

namespace appendguard {

void explain_store_refusal(const char* operation, int fd, const RefusedCall& d, int error) {
  char original[160];
  char effective[160];
  format_open_flags(d.original_flags, original, sizeof original);
  format_open_flags(d.effective_flags, effective, sizeof effective);
  const bool appends = (d.effective_flags & O_APPEND) != 0;
  const bool write_once = store_kind_of(d.path) == StoreKind::kWriteOnce;
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
      : write_once
          // Measured (e2e.test_overwrite_append): on rclone --vfs-cache-mode off and appendonlyfs s3 an
          // append to an existing file works only by writing the file anew; O_APPEND fails there.
          ? "the store refused the file written anew (truncated and its bytes written back: the only way a "
            "write-once store takes an append to an existing file; O_APPEND does not work there); no "
            "setting of appendguard appends to it on this store: write the file in one session (a file this "
            "process creates is held open across its close and reused), or on a local disk and copy it"
          : "the filesystem refused the file written anew; it is not a write-once store appendguard "
            "recognises, and APPENDGUARD_REOPEN=append (the default there) reopens existing files with "
            "O_APPEND instead";
  char message[kMaxPath + 900];
  std::snprintf(message, sizeof message,
                "%s: %s (fd %d) failed with %s on a descriptor appendguard opened %s (the program asked for "
                "%s): %s; see docs/stores.md",
                d.path, operation, fd, errno_name(error), effective, original, rule);
  InternalScope internal;
  report_notice(message);
}

namespace {

// EINVAL on an O_DIRECT descriptor outside FUSE: a misaligned buffer, offset or length, the program's own
// error (a local disk answers it with or without the library), not a store's refusal (issue 24, item 13).
bool programs_own_direct_io_error(int fd, const Description* d, int error) {
  constexpr long kFuseSuperMagic = 0x65735546;
  if (error != EINVAL || !(d->site.effective_flags & O_DIRECT)) return false;
  struct statfs fs;
  return fstatfs(fd, &fs) == 0 && static_cast<long>(fs.f_type) != kFuseSuperMagic;
}

// The program's own O_APPEND descriptor of a file on a store that refuses appends (a write-once store
// under APPENDGUARD_REOPEN=append): the failure is the store's, and hold or rewrite would have worked.
bool appends_on_write_once_store(const Description* d) {
  return (d->site.effective_flags & O_APPEND) && store_kind_of(d->path) == StoreKind::kWriteOnce;
}

}  // namespace

void note_failed_guarded_call(const char* operation, int fd, Description* d, int error) {
  // A spooled file (shim/spool.h) whose spool filled up: the spool's setting is named, once per file.
  if ((error == ENOSPC || error == EDQUOT) && any_spooled() && is_spooled(d) &&
      first_report_of(d, kStoreRefusalReported))
    say_spool_full(operation, fd, d);
  if ((rewritten_open(d) || appends_on_write_once_store(d)) && is_store_refusal(error) &&
      !programs_own_direct_io_error(fd, d, error) && first_report_of(d, kStoreRefusalReported))
    explain_store_refusal(operation, fd, RefusedCall::of(d), error);
  errno = error;
}

namespace {

constinit ToldFiles g_told_refusals;

// The FUSE or append-only mount holding `full_path`, or null.
const MountEntry* store_mount_of(const char* full_path) {
  if (const MountEntry* m = append_only_mount_of(full_path)) return m;
  const MountTable* mounts = g_all_mounts.load(std::memory_order_acquire);
  const MountEntry* m = mounts ? mounts->mount_entry_of(full_path) : nullptr;
  return m && is_fuse_type(m->type) ? m : nullptr;
}

void describe_store(const MountEntry* m, char* out, size_t capacity) {
  std::snprintf(out, capacity, "%s at %s", m->type.c_str(), m->mount_point.c_str());
}

}  // namespace

void note_refused_guarded_open(const char* function, const char* path, int flags, int error) {
  const MountEntry* m = is_store_refusal_of_open(error) && path ? store_mount_of(path) : nullptr;
  // Off a store (a name the patterns guard, on a local disk): a file with the kernel's append-only
  // attribute refuses a truncating open.
  if (!m && error == EPERM && path && has_append_only_attribute(AT_FDCWD, path) &&
      g_told_refusals.first_time(path_key(path))) {
    char flags_text[160];
    format_open_flags(flags, flags_text, sizeof flags_text);
    say_append_only_refusal(function, path, flags_text);
  }
  if (m && g_told_refusals.first_time(path_key(path))) {
    char flags_text[160];
    format_open_flags(flags, flags_text, sizeof flags_text);
    char store[512];
    describe_store(m, store, sizeof store);
    PathLease message(2);  // not on the stack (shim/path_scratch.h)
    RefusedOpen f;
    f.call = function;
    f.path = path;
    f.flags = flags_text;
    f.error = error;
    f.store = store;
    InternalScope internal;
    if (message.get()) {
      format_refused_open(f, message.get(), 2 * kMaxPath);
      report_notice(message.get());
    }
  }
  errno = error;
}

void note_refused_truncate(const char* function, const char* path, long long length, int error) {
  if (error == EPERM && path && !InternalScope::active() && has_append_only_attribute(AT_FDCWD, path)) {
    InternalScope internal;
    PathBuffer full;  // not on the stack (shim/path_scratch.h)
    if (full.get() && resolve_full_path(AT_FDCWD, path, full.get()) &&
        g_told_refusals.first_time(path_key(full.get()))) {
      char length_text[48];
      std::snprintf(length_text, sizeof length_text, "length %lld", length);
      say_append_only_refusal(function, full.get(), length_text);
    }
  }
  errno = error;
}

void note_refused_rename(const char* function, int olddirfd, const char* oldpath, int newdirfd,
                         const char* newpath, int error) {
  if (current_mode() == Mode::kOff || InternalScope::active() || !oldpath || !newpath) {
    errno = error;
    return;
  }
  InternalScope internal;
  PathLease lease(4);  // both paths and the message, not on the stack (shim/path_scratch.h)
  char* old_full = lease.get(0);
  char* new_full = lease.get(1);
  if (old_full && new_full && resolve_full_path(olddirfd, oldpath, old_full) &&
      resolve_full_path(newdirfd, newpath, new_full)) {
    const MountEntry* m = store_mount_of(new_full);
    if (!m) m = store_mount_of(old_full);
    // Off a store: a target with the kernel's append-only attribute (looked at only after an EPERM).
    const bool append_only = !m && error == EPERM && has_append_only_attribute(newdirfd, newpath);
    if (notes_refused_rename(error, m != nullptr || append_only) &&
        g_told_refusals.first_time(path_key(new_full))) {
      char store[512] = "";
      if (m) describe_store(m, store, sizeof store);
      RefusedRename f;
      f.append_only_target = append_only;
      f.call = function;
      f.old_path = old_full;
      f.new_path = new_full;
      f.error = error;
      f.store = store;
      format_refused_rename(f, lease.get(2), 2 * kMaxPath);
      report_notice(lease.get(2));
    }
  }
  errno = error;
}

}  // namespace appendguard
