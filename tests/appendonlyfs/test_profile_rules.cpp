#include <fcntl.h>

#include <catch2/catch.hpp>
#include <cerrno>

#include "profile_rules.hpp"

using namespace appendonlyfs;

namespace {

StoreOpenDecision open_existing(Profile profile, int flags, std::uint64_t size = 10) {
  return decide_open(profile, {flags, true, size});
}

StoreOpenDecision open_missing(Profile profile, int flags) {
  return decide_open(profile, {flags, false, 0});
}

HandleState writer(std::uint64_t written_end = 0) {
  return {HandleKind::write, written_end, false};
}

}  // namespace

TEST_CASE("profile names round-trip") {
  for (Profile profile : {Profile::hdfs, Profile::s3, Profile::strict, Profile::volumes}) {
    CHECK(parse_profile(profile_name(profile)) == profile);
  }
  CHECK_FALSE(parse_profile("nfs"));
  CHECK_FALSE(parse_profile(""));
}

TEST_CASE("read-only opens are read handles in every profile") {
  for (Profile profile : {Profile::hdfs, Profile::s3, Profile::strict, Profile::volumes}) {
    const StoreOpenDecision decision = open_existing(profile, O_RDONLY);
    CHECK(decision.error == 0);
    CHECK(decision.kind == HandleKind::read);
    CHECK_FALSE(decision.truncate);
  }
}

TEST_CASE("hdfs open rules follow fuse_dfs") {
  SECTION("O_RDWR on an existing file is a read stream, even with O_TRUNC") {
    for (int flags : {O_RDWR, O_RDWR | O_TRUNC, O_RDWR | O_APPEND}) {
      const StoreOpenDecision decision = open_existing(Profile::hdfs, flags);
      CHECK(decision.error == 0);
      CHECK(decision.kind == HandleKind::read);
      CHECK_FALSE(decision.truncate);
    }
  }
  SECTION("O_RDWR on a missing file creates a write stream") {
    const StoreOpenDecision decision = open_missing(Profile::hdfs, O_RDWR | O_CREAT);
    CHECK(decision.kind == HandleKind::write);
    CHECK_FALSE(decision.truncate);
  }
  SECTION("O_WRONLY without O_APPEND replaces the file, with or without O_TRUNC") {
    for (int flags : {O_WRONLY, O_WRONLY | O_TRUNC, O_WRONLY | O_CREAT}) {
      const StoreOpenDecision decision = open_existing(Profile::hdfs, flags);
      CHECK(decision.error == 0);
      CHECK(decision.kind == HandleKind::write);
      CHECK(decision.truncate);
    }
  }
  SECTION("O_WRONLY|O_APPEND keeps the contents") {
    const StoreOpenDecision decision = open_existing(Profile::hdfs, O_WRONLY | O_APPEND);
    CHECK(decision.kind == HandleKind::write);
    CHECK_FALSE(decision.truncate);
  }
}

TEST_CASE("s3 open rules follow mountpoint-s3 --allow-overwrite") {
  CHECK(open_existing(Profile::s3, O_RDWR).kind == HandleKind::read);
  CHECK(open_existing(Profile::s3, O_RDWR).error == 0);
  CHECK(open_existing(Profile::s3, O_WRONLY).error == EPERM);
  CHECK(open_existing(Profile::s3, O_WRONLY | O_APPEND).error == EPERM);
  CHECK(open_existing(Profile::s3, O_WRONLY, 0).error == EPERM);
  const StoreOpenDecision overwrite = open_existing(Profile::s3, O_WRONLY | O_TRUNC);
  CHECK(overwrite.error == 0);
  CHECK(overwrite.kind == HandleKind::write);
  CHECK(overwrite.truncate);
  CHECK(open_existing(Profile::s3, O_RDWR | O_TRUNC).kind == HandleKind::write);
  CHECK(open_missing(Profile::s3, O_WRONLY | O_CREAT).kind == HandleKind::write);
  CHECK(open_missing(Profile::s3, O_RDWR | O_CREAT).kind == HandleKind::write);
}

TEST_CASE("strict open rules") {
  CHECK(open_existing(Profile::strict, O_RDWR).kind == HandleKind::write);
  CHECK_FALSE(open_existing(Profile::strict, O_WRONLY).truncate);
  CHECK(open_existing(Profile::strict, O_WRONLY | O_TRUNC).error == EOPNOTSUPP);
  CHECK(open_existing(Profile::strict, O_RDWR | O_TRUNC).error == EOPNOTSUPP);
  CHECK(open_existing(Profile::strict, O_WRONLY | O_TRUNC, 0).error == 0);
  CHECK(open_missing(Profile::strict, O_WRONLY | O_CREAT | O_TRUNC).error == 0);
}

TEST_CASE("hdfs and strict accept writes only at the end of file") {
  for (Profile profile : {Profile::hdfs, Profile::strict}) {
    CHECK(decide_write(profile, writer(), {20, 5, 20}).error == 0);
    const StoreWriteDecision behind = decide_write(profile, writer(), {0, 5, 20});
    CHECK(behind.error == EOPNOTSUPP);
    CHECK(behind.expected_offset == 20);
    CHECK_FALSE(behind.poison_handle);
    CHECK(decide_write(profile, writer(), {25, 5, 20}).error == EOPNOTSUPP);
  }
}

TEST_CASE("writes on read handles fail with the store's errno") {
  const HandleState reader{HandleKind::read, 0, false};
  CHECK(decide_write(Profile::hdfs, reader, {20, 5, 20}).error == EOPNOTSUPP);
  CHECK(decide_write(Profile::s3, reader, {20, 5, 20}).error == EBADF);
}

TEST_CASE("s3 checks offsets against what the handle wrote and poisons on out-of-order writes") {
  HandleState handle = writer();
  CHECK(decide_write(Profile::s3, handle, {0, 4, 0}).error == 0);
  record_write(handle, 0, 4);
  CHECK(handle.written_end == 4);
  CHECK(decide_write(Profile::s3, handle, {4, 4, 999}).error == 0);  // the file size does not matter
  const StoreWriteDecision skip = decide_write(Profile::s3, handle, {100, 1, 4});
  CHECK(skip.error == EINVAL);
  CHECK(skip.poison_handle);
  CHECK(skip.expected_offset == 4);
  handle.poisoned = true;
  const StoreWriteDecision after = decide_write(Profile::s3, handle, {4, 1, 4});
  CHECK(after.error == EINVAL);
  CHECK(after.reason == "poisoned");
}

TEST_CASE("truncate rules") {
  using enum NonZeroTruncate;
  SECTION("hdfs") {
    CHECK(decide_truncate(Profile::hdfs, refuse, 10, 0).effect == TruncateEffect::apply);
    CHECK(decide_truncate(Profile::hdfs, refuse, 10, 0).error == 0);
    CHECK(decide_truncate(Profile::hdfs, refuse, 10, 5).error == EOPNOTSUPP);
    CHECK(decide_truncate(Profile::hdfs, refuse, 0, 4096).error == EOPNOTSUPP);
    CHECK(decide_truncate(Profile::hdfs, refuse, 10, 10).error == EOPNOTSUPP);
    const TruncateDecision ignored = decide_truncate(Profile::hdfs, ignore, 10, 5);
    CHECK(ignored.error == 0);
    CHECK(ignored.effect == TruncateEffect::skip);
  }
  SECTION("s3") {
    CHECK(decide_truncate(Profile::s3, refuse, 10, 0).error == EPERM);
    CHECK(decide_truncate(Profile::s3, refuse, 10, 10).error == EPERM);
    CHECK(decide_truncate(Profile::s3, refuse, 0, 10).error == EPERM);
    CHECK(decide_truncate(Profile::s3, refuse, 0, 0).error == 0);
    // A file being written: accepted, the size not applied (safetensors 0.8's set_len).
    const TruncateDecision set_len = decide_truncate(Profile::s3, refuse, 0, 4096, true);
    CHECK(set_len.error == 0);
    CHECK(set_len.effect == TruncateEffect::skip);
    CHECK(set_len.reason == "while-written");
    CHECK(decide_truncate(Profile::hdfs, refuse, 0, 4096, true).error == EOPNOTSUPP);
  }
  SECTION("strict") {
    CHECK(decide_truncate(Profile::strict, refuse, 10, 10).error == 0);
    CHECK(decide_truncate(Profile::strict, refuse, 10, 0).error == EOPNOTSUPP);
    CHECK(decide_truncate(Profile::strict, refuse, 10, 11).error == EOPNOTSUPP);
  }
}

TEST_CASE("fallocate and rename") {
  for (Profile profile : {Profile::hdfs, Profile::s3, Profile::strict, Profile::volumes})
    CHECK(fallocate_error(profile) == EOPNOTSUPP);
  CHECK(decide_rename(Profile::hdfs, false).error == 0);
  CHECK(decide_rename(Profile::strict, false).error == 0);
  CHECK(decide_rename(Profile::strict, true).error == 0);
  CHECK(decide_rename(Profile::s3, false).error == ENOSYS);
  CHECK(decide_rename(Profile::s3, true).error == ENOSYS);
}

TEST_CASE("hdfs: rename onto an existing file fails EIO, as fuse_dfs's hdfsRename does") {
  const RenameDecision decision = decide_rename(Profile::hdfs, true);
  CHECK(decision.error == EIO);
  CHECK(decision.reason == "destination-exists");
}

TEST_CASE("hdfs_open=translate follows fuse_dfs get_hdfs_open_flags") {
  const auto open = [](int flags, bool exists, std::uint64_t size) {
    return decide_open(Profile::hdfs, {flags, exists, size}, HdfsOpen::translate);
  };
  // O_WRONLY on a non-empty file appends instead of replacing it.
  StoreOpenDecision d = open(O_WRONLY, true, 10);
  CHECK(d.kind == HandleKind::write);
  CHECK_FALSE(d.truncate);
  // O_RDWR on a non-empty file is a read stream; on an empty one a write stream.
  CHECK(open(O_RDWR, true, 10).kind == HandleKind::read);
  CHECK(open(O_RDWR, true, 0).kind == HandleKind::write);
  // O_TRUNC replaces, whatever the access mode.
  d = open(O_RDWR | O_TRUNC, true, 10);
  CHECK(d.kind == HandleKind::write);
  CHECK(d.truncate);
  CHECK(open(O_WRONLY | O_CREAT, false, 0).kind == HandleKind::write);
  CHECK(open(O_RDONLY, true, 10).kind == HandleKind::read);
  // The default is unchanged: O_WRONLY replaces.
  CHECK(decide_open(Profile::hdfs, {O_WRONLY, true, 10}).truncate);
}

TEST_CASE("volumes: new files and O_TRUNC overwrites are written sequentially, nothing else") {
  CHECK(open_missing(Profile::volumes, O_WRONLY | O_CREAT).kind == HandleKind::write);
  CHECK(open_missing(Profile::volumes, O_RDWR | O_CREAT | O_EXCL).kind == HandleKind::write);
  const StoreOpenDecision overwrite = open_existing(Profile::volumes, O_WRONLY | O_TRUNC);
  CHECK(overwrite.error == 0);
  CHECK(overwrite.kind == HandleKind::write);
  CHECK(overwrite.truncate);
  // Appends and "r+b" open, and their writes fail Errno 95.
  for (int flags : {O_WRONLY | O_APPEND, O_RDWR, O_WRONLY, O_RDWR | O_APPEND}) {
    const StoreOpenDecision d = open_existing(Profile::volumes, flags);
    CHECK(d.error == 0);
    CHECK(d.kind == HandleKind::read);
    CHECK_FALSE(d.truncate);
    CHECK(decide_write(Profile::volumes, {d.kind, 0, false}, {10, 1, 10}).error == EOPNOTSUPP);
  }
  HandleState handle = writer();
  CHECK(decide_write(Profile::volumes, handle, {0, 4, 0}).error == 0);
  record_write(handle, 0, 4);
  const StoreWriteDecision skip = decide_write(Profile::volumes, handle, {8, 1, 4});
  CHECK(skip.error == EOPNOTSUPP);
  CHECK(skip.reason == "non-sequential");
  CHECK_FALSE(skip.poison_handle);
  CHECK(decide_write(Profile::volumes, handle, {4, 1, 4}).error == 0);
  CHECK(decide_truncate(Profile::volumes, NonZeroTruncate::refuse, 0, 4096).error == EOPNOTSUPP);
  CHECK(decide_truncate(Profile::volumes, NonZeroTruncate::refuse, 10, 0).error == 0);
  CHECK(decide_rename(Profile::volumes, false).error == ENOSYS);
  CHECK(decide_rename(Profile::volumes, true).error == ENOSYS);
  CHECK(profile_spec(Profile::volumes).handles.link_error == ENOSYS);
}

TEST_CASE("s3: one writer or many readers, as mountpoint-s3 allows") {
  CHECK(busy_error(Profile::s3, HandleKind::read, {}) == 0);
  CHECK(busy_error(Profile::s3, HandleKind::write, {}) == 0);
  CHECK(busy_error(Profile::s3, HandleKind::read, {.readers = 2, .writers = 0}) == 0);
  CHECK(busy_error(Profile::s3, HandleKind::write, {.readers = 1, .writers = 0}) == EPERM);
  CHECK(busy_error(Profile::s3, HandleKind::read, {.readers = 0, .writers = 1}) == EPERM);
  CHECK(busy_error(Profile::s3, HandleKind::write, {.readers = 0, .writers = 1}) == EPERM);
  for (Profile profile : {Profile::hdfs, Profile::strict, Profile::volumes})
    CHECK(busy_error(profile, HandleKind::write, {.readers = 1, .writers = 1}) == 0);
}

TEST_CASE("s3: fsync or the opener's flush after a write ends the upload; later writes fail EIO") {
  CHECK(flush_seals(Profile::s3, 4, true));
  CHECK_FALSE(flush_seals(Profile::s3, 0, true));   // empty: the upload is deferred (touch, dd)
  CHECK_FALSE(flush_seals(Profile::s3, 4, false));  // another process closed a duplicate
  CHECK_FALSE(flush_seals(Profile::hdfs, 4, true));
  CHECK_FALSE(flush_seals(Profile::volumes, 4, true));
  HandleState sealed = writer(4);
  sealed.sealed = true;
  const StoreWriteDecision after = decide_write(Profile::s3, sealed, {4, 1, 4});
  CHECK(after.error == EIO);
  CHECK(after.reason == "upload-complete");
  CHECK(decide_write(Profile::hdfs, {HandleKind::write, 0, false, true}, {4, 1, 4}).error == 0);
}
