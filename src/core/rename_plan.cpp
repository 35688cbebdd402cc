#include "core/rename_plan.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>

namespace appendguard {

bool spools_open(int flags, bool enforce, bool store_renames, bool spool_off) {
  return enforce && !store_renames && !spool_off && (flags & O_CREAT) && (flags & O_EXCL) &&
         (flags & O_ACCMODE) != O_RDONLY;
}

RenamePlan plan_rename(const RenameFacts& facts) {
  if (facts.flags & (RENAME_EXCHANGE | RENAME_WHITEOUT)) {
    return facts.source == RenameSource::kSpooled ? RenamePlan::kExplain : RenamePlan::kPassThrough;
  }
  if (facts.source == RenameSource::kSpooled) return RenamePlan::kUpload;
  if (facts.error == 0) return RenamePlan::kPassThrough;
  const bool refused =
      facts.error == ENOSYS || (!facts.store_renames && (facts.error == EPERM || facts.error == EOPNOTSUPP));
  if (!refused) return RenamePlan::kPassThrough;
  return facts.source == RenameSource::kWritten ? RenamePlan::kCopy : RenamePlan::kExplain;
}

bool removes_target_and_retries(int error, unsigned flags, bool store_removes_target, bool source_is_file,
                                bool target_is_file) {
  return store_removes_target && flags == 0 && (error == EIO || error == EEXIST) && source_is_file &&
         target_is_file;
}

bool spool_has_room(uint64_t free_bytes, uint64_t size) {
  constexpr uint64_t kReserve = uint64_t{64} << 20;
  const uint64_t needed = size + size / 16 + kReserve;
  return free_bytes >= needed;
}

}  // namespace appendguard
