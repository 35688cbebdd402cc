#include <catch2/catch.hpp>

#include <cerrno>

#include <string>
#include <vector>

#include "cli/doctor_output.h"
#include "cli/mount_probe.h"

using namespace appendguard;

namespace {

constexpr const char* kMountinfo =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    "40 22 0:45 / /mnt/hdfs rw,nosuid,nodev,relatime shared:20 - fuse.fuse_dfs fuse_dfs rw,user_id=0\n"
    "41 22 0:46 / /mnt/hdfsx rw - tmpfs tmpfs rw\n"
    "42 40 0:47 / /mnt/hdfs/sub rw,noatime - fuse.rclone remote: rw,user_id=1\n";

std::vector<ProbeResult> all_accepted() {
  std::vector<ProbeResult> results;
  for (int i = 0; i < kRuleCount; ++i) results.push_back(ProbeResult{static_cast<Rule>(i), 0, "accepted"});
  return results;
}

}  // namespace

TEST_CASE("the mount of a path: longest mount point, whole components, options") {
  MountInfo m;
  REQUIRE(mount_of(kMountinfo, "/mnt/hdfs/ckpt/a", m));
  CHECK(m.entry.mount_point == "/mnt/hdfs");
  CHECK(m.entry.type == "fuse.fuse_dfs");
  CHECK(m.entry.source == "fuse_dfs");
  CHECK(m.options == "rw,nosuid,nodev,relatime");
  CHECK(m.super_options == "rw,user_id=0");
  REQUIRE(mount_of(kMountinfo, "/mnt/hdfsx/a", m));
  CHECK(m.entry.type == "tmpfs");
  REQUIRE(mount_of(kMountinfo, "/mnt/hdfs/sub", m));
  CHECK(m.entry.type == "fuse.rclone");
  REQUIRE(mount_of(kMountinfo, "/home", m));
  CHECK(m.entry.mount_point == "/");
  CHECK_FALSE(mount_of("", "/x", m));
}

TEST_CASE("advice from the probe") {
  MountInfo m;
  REQUIRE(mount_of(kMountinfo, "/mnt/hdfs/x", m));
  auto results = all_accepted();
  REQUIRE(recommendations(m, false, results, ReopenChoice::kAppend).size() == 1);
  CHECK(recommendations(m, false, results, ReopenChoice::kAppend)[0].find("not needed here") !=
        std::string::npos);

  results[static_cast<int>(Rule::kWriteBelowEnd)].error = 95;
  auto lines = recommendations(m, false, results, ReopenChoice::kAppend);
  CHECK(lines[0].find("APPENDGUARD_FS=/mnt/hdfs") == 0);
  CHECK(recommendations(m, true, results, ReopenChoice::kAppend)[0].find("known append-only store") !=
        std::string::npos);
  CHECK(with_library(Rule::kWriteBelowEnd, results, ReopenChoice::kAppend).find("needs a code change") !=
        std::string::npos);
  CHECK(with_library(Rule::kReadWriteOpen, results, ReopenChoice::kAppend)
            .find("rewritten to an append open") != std::string::npos);

  results[static_cast<int>(Rule::kAppend)].error = 1;  // s3: no appends, truncating opens work
  CHECK(
      with_library(Rule::kReadWriteOpen, results, ReopenChoice::kAppend).find("APPENDGUARD_REOPEN=rewrite") !=
      std::string::npos);
  bool rewrite = false;
  for (const std::string& line : recommendations(m, true, results, ReopenChoice::kAppend)) {
    rewrite = rewrite || line.find("APPENDGUARD_REOPEN=rewrite") == 0;
  }
  CHECK(rewrite);
}

TEST_CASE("doctor says what the library does with a rename the store refuses") {
  auto results = all_accepted();
  CHECK(with_library(Rule::kRename, results, ReopenChoice::kHold, false) == "works (passed through)");
  results[static_cast<int>(Rule::kRename)].error = ENOSYS;  // mountpoint-s3, Databricks volumes
  results[static_cast<int>(Rule::kRenameOntoExisting)].error = ENOSYS;
  for (Rule rule : {Rule::kRename, Rule::kRenameOntoExisting}) {
    CHECK(with_library(rule, results, ReopenChoice::kHold, false)
              .rfind("works for files the program wrote", 0) == 0);
  }
  results[static_cast<int>(Rule::kRenameOntoExisting)].error = EIO;  // HDFS onto an existing file
  CHECK(with_library(Rule::kRenameOntoExisting, results, ReopenChoice::kAppend, true) ==
        "fails as without (passed through)");
  results[static_cast<int>(Rule::kRename)].error = EPERM;  // EPERM only where the store has no rename
  CHECK(with_library(Rule::kRename, results, ReopenChoice::kAppend, true) ==
        "fails as without (passed through)");
  CHECK(with_library(Rule::kRename, results, ReopenChoice::kHold, false).rfind("works", 0) == 0);
}

TEST_CASE("doctor shows the library's own reopen decision") {
  CHECK(reopen_choice(Reopen::kAuto, StoreKind::kWriteOnce) == ReopenChoice::kHold);
  CHECK(reopen_choice(Reopen::kAuto, StoreKind::kAppends) == ReopenChoice::kAppend);
  CHECK(reopen_choice(Reopen::kRewrite, StoreKind::kWriteOnce) == ReopenChoice::kRewrite);
  CHECK(reopen_choice(Reopen::kAppend, StoreKind::kWriteOnce) == ReopenChoice::kAppend);
  CHECK(reopen_choice(Reopen::kHold, StoreKind::kAppends) == ReopenChoice::kHold);
  CHECK(describe_reopen(ReopenChoice::kHold, Reopen::kAuto, StoreKind::kWriteOnce).rfind("hold (", 0) == 0);
  MountInfo m;
  REQUIRE(mount_of(kMountinfo, "/mnt/hdfs/sub/x", m));  // rclone: write-once
  CHECK(reopen_choice(Reopen::kAuto, classify_store(m.entry)) == ReopenChoice::kHold);
}

TEST_CASE("doctor never recommends a reopen mode that changes nothing there") {
  MountInfo m;
  REQUIRE(mount_of(kMountinfo, "/mnt/hdfs/sub/x", m));
  auto results = all_accepted();
  results[static_cast<int>(Rule::kAppend)].error = 1;
  results[static_cast<int>(Rule::kWriteBelowEnd)].error = 29;
  for (ReopenChoice choice : {ReopenChoice::kHold, ReopenChoice::kRewrite}) {
    for (const std::string& line : recommendations(m, true, results, choice))
      CHECK(line.find("APPENDGUARD_REOPEN=rewrite") == std::string::npos);
    CHECK(with_library(Rule::kReadWriteOpen, results, choice).find("written anew") != std::string::npos);
    CHECK(with_library(Rule::kAppend, results, choice).find("written anew") != std::string::npos);
  }
}

TEST_CASE("doctor's measured cases: classification and the rule") {
  const ShellCase* append = nullptr;
  const ShellCase* below = nullptr;
  for (const ShellCase& c : shell_cases()) {
    if (std::string(c.name).find(">>") != std::string::npos) append = &c;
    if (c.must_refuse) below = &c;
  }
  REQUIRE(append);
  REQUIRE(below);
  CHECK(classify_case(*append, true, false, true, "abcdefgh") == Outcome::kWorks);
  CHECK(classify_case(*append, true, false, true, "efgh") == Outcome::kWrongBytes);  // appended at 0
  CHECK(classify_case(*append, false, true, true, "abcd") == Outcome::kRefusedLoudly);
  CHECK(classify_case(*append, false, false, true, "abcd") == Outcome::kFailsIntact);
  CHECK(classify_case(*append, false, true, true, "") == Outcome::kFileChanged);
  CHECK(case_problem(*append, Outcome::kWorks, Outcome::kWorks).empty());
  CHECK(case_problem(*append, Outcome::kFailsIntact, Outcome::kRefusedLoudly).empty());
  CHECK(case_problem(*append, Outcome::kWorks, Outcome::kRefusedLoudly).find("worse than without") == 0);
  CHECK_FALSE(case_problem(*append, Outcome::kFailsIntact, Outcome::kWrongBytes).empty());
  CHECK_FALSE(case_problem(*append, Outcome::kFailsIntact, Outcome::kFailsIntact).empty());
  CHECK(case_problem(*below, Outcome::kWorks, Outcome::kRefusedLoudly).empty());
  CHECK_FALSE(case_problem(*below, Outcome::kWorks, Outcome::kWorks).empty());
}

TEST_CASE("doctor's JSON: a field per label, repeated labels as arrays, details and tables") {
  DoctorOutput out(true);
  out.field("library", "/x/lib\"a\".so");
  out.field("configuration", "valid");
  out.detail("  mode enforce");
  out.text("a heading only in text");
  out.field("shim for", "a");
  out.field("shim for", "b");
  out.row("probe", "  rename ...", {{"rule", "rename"}, {"with", "works"}});
  out.json_only("verdict", "all good");
  CHECK(out.finish(0, 0) ==
        "{\"library\":\"/x/lib\\\"a\\\".so\",\"configuration\":\"valid\",\"configuration_details\":[\"mode "
        "enforce\"],\"shim_for\":[\"a\",\"b\"],\"probe\":[{\"rule\":\"rename\",\"with\":\"works\"}],"
        "\"verdict\":\"all good\",\"problems\":0,\"status\":0}");
  CHECK(DoctorOutput::quoted("a\nb\x01") == "\"a\\nb\\u0001\"");
  CHECK(DoctorOutput(false).finish(1, 1).empty());
}
