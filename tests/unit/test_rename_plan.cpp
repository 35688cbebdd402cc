#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>

#include <catch2/catch.hpp>

#include "core/rename_plan.h"

using namespace appendguard;

TEST_CASE("a new file created with O_EXCL on a store without rename is spooled, nothing else") {
  const int tmp = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;  // safetensors' NamedTempFile
  CHECK(spools_open(tmp, true, false, false));
  CHECK(spools_open(O_WRONLY | O_CREAT | O_EXCL, true, false, false));         // Python's "xb"
  CHECK_FALSE(spools_open(tmp, true, true, false));                            // the store renames
  CHECK_FALSE(spools_open(tmp, false, false, false));                          // audit mode
  CHECK_FALSE(spools_open(tmp, true, false, true));                            // APPENDGUARD_SPOOL=off
  CHECK_FALSE(spools_open(O_WRONLY | O_CREAT | O_TRUNC, true, false, false));  // "wb": may exist
  CHECK_FALSE(spools_open(O_RDONLY | O_CREAT | O_EXCL, true, false, false));
}

TEST_CASE("a rename is carried out for a source this process wrote when the store refuses it") {
  RenameFacts f;
  f.source = RenameSource::kSpooled;
  CHECK(plan_rename(f) == RenamePlan::kUpload);  // before the real call: the store has no source
  f.flags = RENAME_NOREPLACE;
  CHECK(plan_rename(f) == RenamePlan::kUpload);
  f.flags = RENAME_EXCHANGE;
  CHECK(plan_rename(f) == RenamePlan::kExplain);

  f = RenameFacts{};
  f.source = RenameSource::kWritten;
  f.store_renames = false;
  CHECK(plan_rename(f) == RenamePlan::kPassThrough);  // not refused (or not tried yet)
  f.error = ENOSYS;
  CHECK(plan_rename(f) == RenamePlan::kCopy);
  f.error = EPERM;
  CHECK(plan_rename(f) == RenamePlan::kCopy);
  f.error = ENOENT;
  CHECK(plan_rename(f) == RenamePlan::kPassThrough);  // the program's own error
  f.error = EXDEV;
  CHECK(plan_rename(f) == RenamePlan::kPassThrough);
  f.store_renames = true;  // a store that renames: only ENOSYS is a refusal of renames as such
  f.error = EPERM;
  CHECK(plan_rename(f) == RenamePlan::kPassThrough);
  f.error = ENOSYS;
  CHECK(plan_rename(f) == RenamePlan::kCopy);

  f.source = RenameSource::kUnknown;  // a file another process wrote: said, not carried
  CHECK(plan_rename(f) == RenamePlan::kExplain);
  f.store_renames = false;
  f.error = EOPNOTSUPP;
  CHECK(plan_rename(f) == RenamePlan::kExplain);
}

TEST_CASE("an upload writes the bytes written and the zeros of a deferred preallocation") {
  CHECK(upload_size(100, 0) == 100);
  CHECK(upload_size(100, 4096) == 4096);
  CHECK(upload_size(5000, 4096) == 5000);
}

TEST_CASE("the spool must hold the file, a margin and 64 MiB besides") {
  const uint64_t mib = uint64_t{1} << 20;
  CHECK(spool_has_room(65 * mib, 0));
  CHECK_FALSE(spool_has_room(63 * mib, 0));
  CHECK(spool_has_room(1200 * mib, 1024 * mib));
  CHECK_FALSE(spool_has_room(1100 * mib, 1024 * mib));
}
