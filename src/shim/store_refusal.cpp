#include "shim/store_refusal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/vfs.h>

#include <cstdio>

#include "core/errno_names.h"
#include "core/open_flags.h"
#include "core/unguarded_failure.h"
#include "report/report.h"
#include "shim/mount_guard.h"
#include "shim/report_once.h"
#include "shim/runtime.h"

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
  if ((rewritten_open(d) || appends_on_write_once_store(d)) && is_store_refusal(error) &&
      !programs_own_direct_io_error(fd, d, error) && first_report_of(d, kStoreRefusalReported))
    explain_store_refusal(operation, fd, RefusedCall::of(d), error);
  errno = error;
}

}  // namespace appendguard
