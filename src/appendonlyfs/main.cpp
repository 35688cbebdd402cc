// appendonlyfs: a pass-through FUSE filesystem that applies the write rules of append-only stores.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "event_log.hpp"
#include "fuse_filesystem.hpp"
#include "options.hpp"

namespace {

constexpr int kBadArguments = 2;

std::string absolute_path(const std::string& path) {
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (!resolved) return path;
  std::string result(resolved);
  std::free(resolved);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace appendonlyfs;
  const std::vector<std::string> args(argv + 1, argv + argc);
  ParseResult parsed = parse_command_line(args);
  switch (parsed.action) {
    case CommandAction::help:
      std::fputs(usage_text().c_str(), stdout);
      return 0;
    case CommandAction::version:
      std::printf("appendonlyfs %s\n", kVersion);
      return 0;
    case CommandAction::error:
      std::fprintf(stderr, "%s\n", parsed.error.c_str());
      return kBadArguments;
    case CommandAction::run:
      break;
  }
  Options& options = parsed.options;
  if (auto error = check_directories(options)) {
    std::fprintf(stderr, "%s\n", error->c_str());
    return kBadArguments;
  }
  // Daemonizing changes the working directory to /.
  options.backing = absolute_path(options.backing);
  options.mountpoint = absolute_path(options.mountpoint);

  EventLog log;
  if (!options.log_path.empty()) {
    // Opened before daemonizing, so a relative path is relative to the caller's directory.
    if (const int error = log.open(options.log_path)) {
      const char* why = error == ELOOP    ? "it is a symbolic link, never followed"
                        : error == EINVAL ? "not a regular file"
                                          : std::strerror(error);
      std::fprintf(stderr,
                   "appendonlyfs: cannot open -o log=%s: %s (expected a writable regular file path)\n",
                   options.log_path.c_str(), why);
      return kBadArguments;
    }
  }
  return run_filesystem(options, log);
}
