// Walks the profile table (profiles.cpp): every profile has a name the option parser accepts, help text
// the usage shows, and rules that the rule functions apply exactly as listed, with no dead open case.
#include <fcntl.h>

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "options.hpp"
#include "profile_rules.hpp"

using namespace appendonlyfs;

namespace {

bool holds(When condition, bool value) {
  return condition == When::any || (condition == When::yes) == value;
}

// The first case whose conditions hold, found independently of decide_open.
const OpenCase* listed_case(std::span<const OpenCase> cases, int flags, bool exists, std::uint64_t size) {
  for (const OpenCase& c : cases) {
    if (holds(c.exists, exists) && holds(c.rdwr, (flags & O_ACCMODE) == O_RDWR) &&
        holds(c.trunc, (flags & O_TRUNC) != 0) && holds(c.append, (flags & O_APPEND) != 0) &&
        holds(c.empty, size == 0)) {
      return &c;
    }
  }
  return nullptr;
}

void check_open_cases(const ProfileSpec& spec, std::span<const OpenCase> cases, HdfsOpen hdfs_open) {
  std::set<const OpenCase*> reached;
  for (bool exists : {false, true}) {
    for (std::uint64_t size : {0u, 10u}) {
      if (!exists && size != 0) continue;
      for (int access : {O_WRONLY, O_RDWR}) {
        for (int extra : {0, O_TRUNC, O_APPEND, O_TRUNC | O_APPEND}) {
          const int flags = access | extra;
          INFO(spec.name << " flags=" << flags << " exists=" << exists << " size=" << size);
          const OpenCase* c = listed_case(cases, flags, exists, size);
          REQUIRE(c != nullptr);  // the last case of every list matches anything left
          reached.insert(c);
          const StoreOpenDecision d = decide_open(spec.profile, {flags, exists, size}, hdfs_open);
          CHECK(d.error == c->error);
          CHECK(d.reason == c->reason);
          if (c->error != 0) continue;
          CHECK(d.kind == c->kind);
          CHECK(d.truncate == (c->truncate == When::any ? (flags & O_TRUNC) != 0 : c->truncate == When::yes));
        }
      }
    }
    const StoreOpenDecision read = decide_open(spec.profile, {O_RDONLY, exists, 10}, hdfs_open);
    CHECK(read.error == 0);
    CHECK(read.kind == HandleKind::read);
  }
  CHECK(reached.size() == cases.size());  // no case is shadowed by the ones before it
}

}  // namespace

TEST_CASE("every Profile has exactly one table entry, and the first is the default") {
  std::set<std::string_view> names;
  for (const ProfileSpec& spec : profiles()) {
    CHECK(names.insert(spec.name).second);
    CHECK(&profile_spec(spec.profile) == &spec);
  }
  for (Profile profile : {Profile::hdfs, Profile::s3, Profile::strict, Profile::volumes})
    CHECK(profile_spec(profile).profile == profile);
  CHECK(profiles().front().profile == Options{}.profile);
}

TEST_CASE("every profile's name is accepted by the option parser and its help is in the usage") {
  const std::string usage = usage_text();
  for (const ProfileSpec& spec : profiles()) {
    INFO(spec.name);
    const std::vector<std::string> args = {"-o", "profile=" + std::string(spec.name), "/b", "/m"};
    const ParseResult parsed = parse_command_line(args);
    REQUIRE(parsed.action == CommandAction::run);
    CHECK(parsed.options.profile == spec.profile);
    REQUIRE_FALSE(spec.help.empty());
    std::string_view help = spec.help;
    for (std::size_t end; (end = help.find('\n')) != std::string_view::npos; help.remove_prefix(end + 1)) {
      CHECK(usage.find(help.substr(0, end)) != std::string::npos);
    }
    CHECK(usage.find(help) != std::string::npos);
    CHECK(usage.find(profile_names("|")) != std::string::npos);
  }
  const ParseResult bad = parse_command_line(std::vector<std::string>{"-o", "profile=nfs", "/b", "/m"});
  CHECK(bad.error.find(profile_names()) != std::string::npos);
}

TEST_CASE("open rules are applied as listed") {
  for (const ProfileSpec& spec : profiles()) {
    REQUIRE_FALSE(spec.open.empty());
    check_open_cases(spec, spec.open, HdfsOpen::replace);
    if (spec.translated_open.empty()) {
      check_open_cases(spec, spec.open, HdfsOpen::translate);  // the option does not apply
    } else {
      check_open_cases(spec, spec.translated_open, HdfsOpen::translate);
    }
  }
}

TEST_CASE("write rules are applied as listed") {
  for (const ProfileSpec& spec : profiles()) {
    INFO(spec.name);
    const WriteRules& rules = spec.write;
    const StoreWriteRequest at_end{20, 5, 20};
    CHECK(decide_write(spec.profile, {HandleKind::read, 0, false}, at_end).error == rules.read_handle_error);

    const HandleState fresh{HandleKind::write, 0, false};
    const std::uint64_t anchor = rules.anchor == WriteAnchor::handle_end ? 0 : 20;
    const StoreWriteDecision ok = decide_write(spec.profile, fresh, {anchor, 5, 20});
    CHECK(ok.error == 0);
    CHECK(ok.expected_offset == anchor);

    const StoreWriteDecision misplaced = decide_write(spec.profile, fresh, {anchor + 1, 5, 20});
    CHECK(misplaced.error == rules.misplaced_error);
    CHECK(misplaced.reason == rules.misplaced_reason);
    CHECK(misplaced.poison_handle == rules.misplaced_poisons);
    CHECK(misplaced.expected_offset == anchor);

    const StoreWriteDecision after_poison =
        decide_write(spec.profile, {HandleKind::write, 0, true}, {anchor, 5, 20});
    CHECK(after_poison.error == (rules.misplaced_poisons ? rules.poisoned_error : 0));
  }
}

TEST_CASE("truncate, rename, fallocate and handle rules are applied as listed") {
  for (const ProfileSpec& spec : profiles()) {
    INFO(spec.name);
    const TruncateRules& rules = spec.truncate;
    for (std::uint64_t current : {0u, 10u}) {
      for (std::uint64_t size : {0u, 4u, 10u, 20u}) {
        INFO("current=" << current << " size=" << size);
        const bool allowed = rules.allows == TruncateAllows::to_zero             ? size == 0
                             : rules.allows == TruncateAllows::empty_stays_empty ? current == 0 && size == 0
                                                                                 : size == current;
        const TruncateDecision d = decide_truncate(spec.profile, NonZeroTruncate::refuse, current, size);
        CHECK(d.error == (allowed ? 0 : rules.error));
        CHECK(d.effect == (allowed ? TruncateEffect::apply : TruncateEffect::skip));
        CHECK(d.reason == (allowed       ? rules.allowed_reason
                           : current > 0 ? rules.reason_nonempty_file
                                         : rules.reason_empty_file));
        const TruncateDecision ignored =
            decide_truncate(spec.profile, NonZeroTruncate::ignore, current, size);
        CHECK(ignored.error == (allowed || rules.ignorable ? 0 : rules.error));
        const TruncateDecision written =
            decide_truncate(spec.profile, NonZeroTruncate::refuse, current, size, true);
        if (rules.ignored_while_written) {
          CHECK(written.error == 0);
          CHECK(written.effect == TruncateEffect::skip);
        } else {
          CHECK(written.error == d.error);
          CHECK(written.effect == d.effect);
        }
      }
    }
    const RenameRules& rename = spec.rename;
    CHECK(decide_rename(spec.profile, false).error == rename.error);
    const RenameDecision onto = decide_rename(spec.profile, true);
    CHECK(onto.error == (rename.error != 0 ? rename.error : rename.onto_file_error));
    if (rename.error == 0) CHECK(onto.reason == rename.onto_file_reason);
    CHECK(fallocate_error(spec.profile) == spec.fallocate_error);
    CHECK(spec.fallocate_error != 0);
    const HandleRules& handles = spec.handles;
    CHECK(busy_error(spec.profile, HandleKind::write, {.readers = 1, .writers = 0}) == handles.busy_error);
    CHECK(busy_error(spec.profile, HandleKind::read, {.readers = 0, .writers = 1}) == handles.busy_error);
    CHECK(flush_seals(spec.profile, 1, true) == (handles.sealed_error != 0));
    if (spec.profile == Profile::s3) CHECK(handles.sync_open_error == EINVAL);
    if (spec.profile == Profile::s3) CHECK(handles.unlink_written_error == EPERM);
    if (handles.unlink_written_error != 0) CHECK(handles.busy_error != 0);  // it needs the writers counted
    HandleState sealed{HandleKind::write, 0, false, true};
    const std::uint64_t anchor = spec.write.anchor == WriteAnchor::handle_end ? 0 : 20;
    CHECK(decide_write(spec.profile, sealed, {anchor, 5, 20}).error == handles.sealed_error);
  }
}
