// `appendguard run` command line -> the environment the command runs with, and its usage text; the
// options that set a variable come from core/variables.h's table. Pure, unit-tested.
#pragma once

#include <functional>
#include <map>
#include <optional>
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

// What `appendguard run` knows of the command it starts, to tell whether a launcher passes the library on.
struct LauncherContext {
  std::string program;                             // command[0] resolved in PATH (symlinks followed), or ""
  std::map<std::string, std::string> environment;  // the environment the command starts with
  std::function<std::optional<std::string>(const std::string&)> read_file;  // nullopt when absent
};

// One line when `command` is a launcher that does not pass the environment on to its workers by itself
// and the flag or file it needs is missing (Open MPI's mpirun without -x for LD_PRELOAD and the set
// APPENDGUARD* variables, srun/sbatch with an --export list leaving them out, DeepSpeed's multi-node
// launcher without them in .deepspeed_env, `ray job submit` without them in its runtime env); "" otherwise.
std::string launcher_warning(const std::vector<std::string>& command, const LauncherContext& context);

}  // namespace appendguard
