#include <catch2/catch.hpp>

#include <string>
#include <vector>

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
  REQUIRE(recommendations(m, false, results).size() == 1);
  CHECK(recommendations(m, false, results)[0].find("not needed here") != std::string::npos);

  results[static_cast<int>(Rule::kWriteBelowEnd)].error = 95;
  auto lines = recommendations(m, false, results);
  CHECK(lines[0].find("APPENDGUARD_FS=/mnt/hdfs") == 0);
  CHECK(recommendations(m, true, results)[0].find("known append-only store") != std::string::npos);
  CHECK(with_library(Rule::kWriteBelowEnd, results).find("needs a code change") != std::string::npos);
  CHECK(with_library(Rule::kReadWriteOpen, results).find("rewritten to an append open") != std::string::npos);

  results[static_cast<int>(Rule::kAppend)].error = 1;  // s3: no appends, truncating opens work
  CHECK(with_library(Rule::kReadWriteOpen, results).find("APPENDGUARD_REOPEN=rewrite") != std::string::npos);
  bool rewrite = false;
  for (const std::string& line : recommendations(m, true, results)) {
    rewrite = rewrite || line.find("APPENDGUARD_REOPEN=rewrite") == 0;
  }
  CHECK(rewrite);
}
