// `appendguard run` command line -> the environment the command runs with, and its usage text; the
// options that set a variable come from core/variables.h's table. Pure, unit-tested.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace appendguard {

struct LaunchPlan {
  std::vector<std::pair<std::string, std::string>> environment;  // variables to set
  std::vector<std::string> command;
};

struct LaunchParse {
  LaunchPlan plan;
  std::string error;  // one line; empty on success
  bool ok() const { return error.empty(); }
};

// `args` are the words after "run". `library` is the preload library's path; `existing_preload` the
// current LD_PRELOAD (kept, after ours); `existing_mode` the current APPENDGUARD: `audit` there is the
// default (as every other APPENDGUARD_* variable already in the environment is), `--enforce` overrides
// it. Unset or off, the launcher enforces: running it means wanting the guard.
// `appendguard run --help`: the options and the environment section, both from core/variables.h's table.
std::string run_usage();

LaunchParse parse_run_arguments(const std::vector<std::string>& args, const std::string& library,
                                const std::string& existing_preload, const std::string& existing_mode = "");

}  // namespace appendguard
