#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "options.hpp"

using namespace appendonlyfs;

namespace {

ParseResult parse(std::vector<std::string> args) {
  return parse_command_line(args);
}

}  // namespace

TEST_CASE("defaults") {
  const ParseResult result = parse({"/b", "/m"});
  REQUIRE(result.action == CommandAction::run);
  CHECK(result.options.profile == Profile::hdfs);
  CHECK(result.options.non_zero_truncate == NonZeroTruncate::refuse);
  CHECK(result.options.hdfs_open == HdfsOpen::replace);
  CHECK(result.options.backing == "/b");
  CHECK(result.options.mountpoint == "/m");
  CHECK_FALSE(result.options.foreground);
  CHECK_FALSE(result.options.faults.fail_after);
  CHECK_FALSE(result.options.faults.flush_eio);
}

TEST_CASE("all own options, comma lists and repeated -o") {
  const ParseResult result =
      parse({"-o", "profile=s3,short_writes=3", "-f", "-oeio_every=5", "-o",
             "fail_after=0,delay_us=10,log=/tmp/x.log,truncate=ignore,hdfs_open=translate,flush_eio", "-s",
             "/b", "/m"});
  REQUIRE(result.action == CommandAction::run);
  const Options& options = result.options;
  CHECK(options.profile == Profile::s3);
  CHECK(options.faults.short_writes == 3);
  CHECK(options.faults.eio_every == 5);
  CHECK(options.faults.fail_after == 0u);
  CHECK(options.faults.delay_us == 10);
  CHECK(options.faults.flush_eio);
  CHECK(options.log_path == "/tmp/x.log");
  CHECK(options.non_zero_truncate == NonZeroTruncate::ignore);
  CHECK(options.hdfs_open == HdfsOpen::translate);
  CHECK(options.foreground);
  CHECK(options.single_threaded);
}

TEST_CASE("libfuse options pass through") {
  const ParseResult result = parse({"-o", "allow_other,fsname=x,auto_unmount", "/b", "/m"});
  REQUIRE(result.action == CommandAction::run);
  CHECK(result.options.fuse_options == std::vector<std::string>{"allow_other", "fsname=x", "auto_unmount"});
}

TEST_CASE("help and version") {
  CHECK(parse({"--help"}).action == CommandAction::help);
  CHECK(parse({"-h"}).action == CommandAction::help);
  CHECK(parse({"--version"}).action == CommandAction::version);
  CHECK(parse({"-V", "/b", "/m"}).action == CommandAction::version);
}

TEST_CASE("bad arguments give one line naming option, value and what is accepted") {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {{"-o", "profile=nfs", "/b", "/m"}, {"profile", "'nfs'", "hdfs, s3, strict"}},
      {{"-o", "short_writes=0", "/b", "/m"}, {"short_writes", "'0'", "positive integer"}},
      {{"-o", "short_writes=1k", "/b", "/m"}, {"short_writes", "'1k'"}},
      {{"-o", "eio_every=", "/b", "/m"}, {"eio_every", "positive integer"}},
      {{"-o", "fail_after=-3", "/b", "/m"}, {"fail_after", "'-3'", "non-negative integer"}},
      {{"-o", "delay_us=99999999999999999999999", "/b", "/m"}, {"delay_us"}},
      {{"-o", "truncate=yes", "/b", "/m"}, {"truncate", "'yes'", "refuse or ignore"}},
      {{"-o", "hdfs_open=append", "/b", "/m"}, {"hdfs_open", "'append'", "replace or translate"}},
      {{"-o", "log=", "/b", "/m"}, {"log", "file path"}},
      {{"-o", "allow_other=1", "/b", "/m"}, {"unknown -o option", "allow_other=1"}},
      {{"-o", "fsname", "/b", "/m"}, {"unknown -o option", "fsname"}},
      {{"-o", "nonsense", "/b", "/m"}, {"unknown -o option", "'nonsense'", "profile, truncate"}},
      {{"-o"}, {"-o needs a value"}},
      {{"--frobnicate", "/b", "/m"}, {"unknown argument", "--frobnicate"}},
      {{}, {"missing BACKING and MOUNTPOINT"}},
      {{"/b"}, {"missing MOUNTPOINT"}},
      {{"/b", "/m", "/x"}, {"unexpected argument", "/x"}},
  };
  for (const Case& c : cases) {
    const ParseResult result = parse(c.args);
    INFO(result.error);
    CHECK(result.action == CommandAction::error);
    CHECK(result.error.find('\n') == std::string::npos);
    CHECK(result.error.starts_with("appendonlyfs: "));
    for (const std::string& fragment : c.fragments) CHECK(result.error.find(fragment) != std::string::npos);
  }
}

TEST_CASE("directories must exist") {
  Options options;
  options.backing = "/nonexistent-appendonlyfs-dir";
  options.mountpoint = "/tmp";
  auto error = check_directories(options);
  REQUIRE(error);
  CHECK(error->find("BACKING '/nonexistent-appendonlyfs-dir' does not exist") != std::string::npos);
  options.backing = "/tmp";
  options.mountpoint = "/etc/passwd";
  error = check_directories(options);
  REQUIRE(error);
  CHECK(error->find("MOUNTPOINT '/etc/passwd' is not a directory") != std::string::npos);
  options.mountpoint = "/tmp";
  CHECK_FALSE(check_directories(options));
}
