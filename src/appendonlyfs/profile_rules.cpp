#include "profile_rules.hpp"

#include <fcntl.h>

#include <cerrno>

namespace appendonlyfs {

const ProfileSpec& profile_spec(Profile profile) {
  for (const ProfileSpec& spec : profiles()) {
    if (spec.profile == profile) return spec;
  }
  return profiles().front();  // unreachable: every Profile has an entry (test_profile_rules checks)
}

std::string_view profile_name(Profile profile) {
  return profile_spec(profile).name;
}

std::optional<Profile> parse_profile(std::string_view name) {
  for (const ProfileSpec& spec : profiles()) {
    if (spec.name == name) return spec.profile;
  }
  return std::nullopt;
}

std::string profile_names(std::string_view separator) {
  std::string text;
  for (const ProfileSpec& spec : profiles()) {
    if (!text.empty()) text += separator;
    text += spec.name;
  }
  return text;
}

namespace {

bool holds(When condition, bool value) {
  return condition == When::any || (condition == When::yes) == value;
}

bool matches(const OpenCase& rule, int flags, const StoreOpenRequest& request) {
  return holds(rule.exists, request.exists) && holds(rule.rdwr, (flags & O_ACCMODE) == O_RDWR) &&
         holds(rule.trunc, (flags & O_TRUNC) != 0) && holds(rule.append, (flags & O_APPEND) != 0) &&
         holds(rule.empty, request.size == 0);
}

}  // namespace

StoreOpenDecision decide_open(Profile profile, const StoreOpenRequest& request, HdfsOpen hdfs_open) {
  if ((request.flags & O_ACCMODE) == O_RDONLY) return {.kind = HandleKind::read};
  const ProfileSpec& spec = profile_spec(profile);
  const std::span<const OpenCase> rules =
      hdfs_open == HdfsOpen::translate && !spec.translated_open.empty() ? spec.translated_open : spec.open;
  for (const OpenCase& rule : rules) {
    if (!matches(rule, request.flags, request)) continue;
    if (rule.error != 0) return {.error = rule.error, .kind = HandleKind::read, .reason = rule.reason};
    const bool truncate =
        rule.truncate == When::any ? (request.flags & O_TRUNC) != 0 : rule.truncate == When::yes;
    return {.error = 0, .kind = rule.kind, .truncate = truncate, .reason = rule.reason};
  }
  return {.error = EINVAL, .kind = HandleKind::read, .reason = "no open rule matched"};
}

StoreWriteDecision decide_write(Profile profile, const HandleState& handle,
                                const StoreWriteRequest& request) {
  const WriteRules& rules = profile_spec(profile).write;
  StoreWriteDecision decision;
  if (handle.kind == HandleKind::read) {
    decision.error = rules.read_handle_error;
    decision.expected_offset = request.file_end;
    decision.reason = "read-handle";
    return decision;
  }
  decision.expected_offset = rules.anchor == WriteAnchor::handle_end ? handle.written_end : request.file_end;
  const int sealed_error = profile_spec(profile).handles.sealed_error;
  if (sealed_error != 0 && handle.sealed) {
    decision.error = sealed_error;
    decision.reason = "upload-complete";
  } else if (rules.misplaced_poisons && handle.poisoned) {
    decision.error = rules.poisoned_error;
    decision.reason = "poisoned";
  } else if (request.offset != decision.expected_offset) {
    decision.error = rules.misplaced_error;
    decision.poison_handle = rules.misplaced_poisons;
    decision.reason = rules.misplaced_reason;
  }
  return decision;
}

void record_write(HandleState& handle, std::uint64_t offset, std::uint64_t written) {
  handle.written_end = offset + written;
}

TruncateDecision decide_truncate(Profile profile, NonZeroTruncate non_zero, std::uint64_t current_size,
                                 std::uint64_t new_size, bool being_written) {
  const TruncateRules& rules = profile_spec(profile).truncate;
  if (rules.ignored_while_written && being_written) return {0, TruncateEffect::skip, "while-written"};
  bool allowed = false;
  switch (rules.allows) {
    case TruncateAllows::to_zero:
      allowed = new_size == 0;
      break;
    case TruncateAllows::empty_stays_empty:
      allowed = current_size == 0 && new_size == 0;
      break;
    case TruncateAllows::same_size:
      allowed = new_size == current_size;
      break;
  }
  if (allowed) return {0, TruncateEffect::apply, rules.allowed_reason};
  if (rules.ignorable && non_zero == NonZeroTruncate::ignore)
    return {0, TruncateEffect::skip, "non-zero-ignored"};
  return {rules.error, TruncateEffect::skip,
          current_size > 0 ? rules.reason_nonempty_file : rules.reason_empty_file};
}

int fallocate_error(Profile profile) {
  return profile_spec(profile).fallocate_error;
}

RenameDecision decide_rename(Profile profile, bool onto_existing_file) {
  const RenameRules& rules = profile_spec(profile).rename;
  if (rules.error != 0) return {rules.error, {}};
  if (onto_existing_file && rules.onto_file_error != 0)
    return {rules.onto_file_error, rules.onto_file_reason};
  return {};
}

int busy_error(Profile profile, HandleKind kind, const OpenHandles& open) {
  const int error = profile_spec(profile).handles.busy_error;
  if (error == 0) return 0;
  const bool busy = kind == HandleKind::write ? open.readers + open.writers > 0 : open.writers > 0;
  return busy ? error : 0;
}

bool flush_seals(Profile profile, std::uint64_t bytes_written, bool by_opening_process) {
  return profile_spec(profile).handles.sealed_error != 0 && bytes_written > 0 && by_opening_process;
}

}  // namespace appendonlyfs
