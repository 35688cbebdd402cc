// Command line parsing for appendonlyfs; no FUSE dependency.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fault_injector.hpp"
#include "profile_rules.hpp"

namespace appendonlyfs {

inline constexpr const char* kVersion = "0.1.0";

struct Options {
  Profile profile = Profile::hdfs;
  NonZeroTruncate non_zero_truncate = NonZeroTruncate::refuse;
  HdfsOpen hdfs_open = HdfsOpen::replace;
  FaultOptions faults;
  bool rename_open_unlinked = false;  // -o unlink_open=rename
  std::string log_path;
  bool foreground = false;
  bool single_threaded = false;
  bool debug = false;
  std::vector<std::string> fuse_options;  // passed on to libfuse as -o
  std::string backing;
  std::string mountpoint;
};

// What the command line asks for (not appendguard::Action, the library's answer to a violation).
enum class CommandAction { run, help, version, error };

struct ParseResult {
  CommandAction action = CommandAction::run;
  Options options;
  std::string error;  // one line, without the trailing newline, when action == error
};

// `args` excludes argv[0].
ParseResult parse_command_line(std::span<const std::string> args);

// Checks that BACKING and MOUNTPOINT are existing directories; the error line otherwise.
std::optional<std::string> check_directories(const Options& options);

std::string usage_text();

}  // namespace appendonlyfs
