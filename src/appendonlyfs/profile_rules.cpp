#include "profile_rules.hpp"

#include <fcntl.h>

#include <cerrno>

namespace appendonlyfs {

std::string_view profile_name(Profile profile) {
  switch (profile) {
    case Profile::hdfs:
      return "hdfs";
    case Profile::s3:
      return "s3";
    case Profile::strict:
      return "strict";
  }
  return "?";
}

std::optional<Profile> parse_profile(std::string_view name) {
  for (Profile profile : {Profile::hdfs, Profile::s3, Profile::strict}) {
    if (profile_name(profile) == name) return profile;
  }
  return std::nullopt;
}

namespace {

StoreOpenDecision allow(HandleKind kind, bool truncate, std::string_view reason = {}) {
  return StoreOpenDecision{.error = 0, .kind = kind, .truncate = truncate, .reason = reason};
}

StoreOpenDecision refuse_open(int error, std::string_view reason) {
  return StoreOpenDecision{.error = error, .kind = HandleKind::read, .truncate = false, .reason = reason};
}

// Apache fuse_dfs (fuse_impls_open.c): O_RDWR becomes O_RDONLY if the file exists, else O_WRONLY;
// an O_WRONLY open without O_APPEND is a libhdfs create with overwrite=true.
StoreOpenDecision decide_open_hdfs(int access, int flags, bool exists) {
  if (!exists) return allow(HandleKind::write, false);
  if (access == O_RDWR) return allow(HandleKind::read, false, "O_RDWR on an existing file is a read stream");
  if (flags & O_APPEND) return allow(HandleKind::write, (flags & O_TRUNC) != 0);
  return allow(HandleKind::write, true, "O_WRONLY without O_APPEND replaces the file");
}

StoreOpenDecision decide_open_hdfs_translated(int access, int flags, const StoreOpenRequest& request) {
  if (!request.exists) return allow(HandleKind::write, false);
  if ((flags & O_TRUNC) || request.size == 0) return allow(HandleKind::write, true);
  if (access == O_RDWR) return allow(HandleKind::read, false, "O_RDWR on a non-empty file is a read stream");
  return allow(HandleKind::write, false, "O_WRONLY on a non-empty file appends");
}

// mountpoint-s3 with --allow-overwrite: an existing file can only be written after O_TRUNC.
StoreOpenDecision decide_open_s3(int access, int flags, bool exists) {
  if (!exists) return allow(HandleKind::write, false);
  if (flags & O_TRUNC) return allow(HandleKind::write, true);
  if (access == O_RDWR) return allow(HandleKind::read, false, "O_RDWR on an existing file is a read handle");
  return refuse_open(EPERM, "existing file opened for writing without O_TRUNC");
}

StoreOpenDecision decide_open_strict(int flags, const StoreOpenRequest& request) {
  if (request.exists && (flags & O_TRUNC) && request.size > 0) {
    return refuse_open(EOPNOTSUPP, "O_TRUNC would shrink a non-empty file");
  }
  return allow(HandleKind::write, false);
}

}  // namespace

StoreOpenDecision decide_open(Profile profile, const StoreOpenRequest& request, HdfsOpen hdfs_open) {
  const int access = request.flags & O_ACCMODE;
  if (access == O_RDONLY) return allow(HandleKind::read, false);
  switch (profile) {
    case Profile::hdfs:
      if (hdfs_open == HdfsOpen::translate)
        return decide_open_hdfs_translated(access, request.flags, request);
      return decide_open_hdfs(access, request.flags, request.exists);
    case Profile::s3:
      return decide_open_s3(access, request.flags, request.exists);
    case Profile::strict:
      return decide_open_strict(request.flags, request);
  }
  return refuse_open(EINVAL, "unknown profile");
}

StoreWriteDecision decide_write(Profile profile, const HandleState& handle, const StoreWriteRequest& request) {
  StoreWriteDecision decision;
  if (handle.kind == HandleKind::read) {
    decision.error = profile == Profile::hdfs ? EOPNOTSUPP : EBADF;
    decision.expected_offset = request.file_end;
    decision.reason = "read-handle";
    return decision;
  }
  if (profile == Profile::s3) {
    decision.expected_offset = handle.written_end;
    if (handle.poisoned) {
      decision.error = EINVAL;
      decision.reason = "poisoned";
    } else if (request.offset != handle.written_end) {
      decision.error = EINVAL;
      decision.poison_handle = true;
      decision.reason = "out-of-order";
    }
    return decision;
  }
  decision.expected_offset = request.file_end;
  if (request.offset != request.file_end) {
    decision.error = EOPNOTSUPP;
    decision.reason = "not-at-end";
  }
  return decision;
}

void record_write(HandleState& handle, std::uint64_t offset, std::uint64_t written) {
  handle.written_end = offset + written;
}

TruncateDecision decide_truncate(Profile profile, NonZeroTruncate non_zero, std::uint64_t current_size,
                                 std::uint64_t new_size) {
  switch (profile) {
    case Profile::hdfs:
      if (new_size == 0) return {0, TruncateEffect::apply, "recreate"};
      if (non_zero == NonZeroTruncate::ignore) return {0, TruncateEffect::skip, "non-zero-ignored"};
      return {EOPNOTSUPP, TruncateEffect::skip, "non-zero"};
    case Profile::s3:
      if (current_size == 0 && new_size == 0) return {0, TruncateEffect::apply, {}};
      return {EPERM, TruncateEffect::skip, current_size > 0 ? "committed-file" : "extend"};
    case Profile::strict:
      if (new_size == current_size) return {0, TruncateEffect::apply, {}};
      return {EOPNOTSUPP, TruncateEffect::skip, "size-change"};
  }
  return {EINVAL, TruncateEffect::skip, "unknown profile"};
}

int fallocate_error(Profile) {
  return EOPNOTSUPP;
}

RenameDecision decide_rename(Profile profile, bool onto_existing_file) {
  switch (profile) {
    case Profile::hdfs:
      if (onto_existing_file) return {EIO, "destination-exists"};
      return {};
    case Profile::s3:
      return {ENOSYS, {}};
    case Profile::strict:
      return {};
  }
  return {EINVAL, "unknown profile"};
}

}  // namespace appendonlyfs
