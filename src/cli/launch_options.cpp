#include "cli/launch_options.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "core/config.h"
#include "core/variables.h"

namespace appendguard {
namespace {

struct FoundOption {
  const Variable* variable = nullptr;
  const LaunchOption* option = nullptr;
};

// The option named `name` (without "=value") and the variable it sets; nulls when there is none.
FoundOption find_option(std::string_view name) {
  for (const Variable& v : known_variables()) {
    for (const LaunchOption& o : v.options) {
      if (name == o.name) return {&v, &o};
    }
  }
  return {};
}

// "--paths P" or "--trace".
std::string option_synopsis(const LaunchOption& o) {
  return o.argument ? std::string(o.name) + " " + o.argument : std::string(o.name);
}

std::string accepted_options() {
  std::string text;
  for (const Variable& v : known_variables()) {
    for (const LaunchOption& o : v.options) text += (text.empty() ? "" : ", ") + option_synopsis(o);
  }
  return text + ", then -- COMMAND";
}

// "  --paths P             help": the option padded to a column, as the usage lists options.
std::string option_line(std::string option, const char* help, size_t column = 24) {
  option.insert(0, "  ");
  option.resize(std::max<size_t>(option.size() + 1, column), ' ');
  return option + help + "\n";
}

}  // namespace

std::string run_usage() {
  std::string text =
      "usage: appendguard run [OPTIONS] -- COMMAND [ARGS...]\n"
      "Runs COMMAND with libappendguard.so preloaded (before an existing LD_PRELOAD) and enabled. The\n"
      "APPENDGUARD_* variables already in the environment are the defaults (APPENDGUARD=audit stays audit);\n"
      "the options override them.\n";
  for (const Variable& v : known_variables()) {
    for (const LaunchOption& o : v.options) text += option_line(option_synopsis(o), o.help);
  }
  text +=
      "A static, Go, set-uid or set-gid COMMAND cannot be reached by the library: one line says so before "
      "it\n"
      "starts.\n";

  text += "\nenvironment (man appendguard; docs/reference.md):\n";
  for (const Variable& v : known_variables()) {
    if (v.kind != VariableKind::kSetting) continue;
    text += option_line(v.name, v.help, 28);
    text += std::string(28, ' ') + "accepted: " + v.accepted;
    if (*v.default_value) text += std::string("; default ") + v.default_value;
    for (size_t k = 0; k < v.options.size(); ++k) {
      text += std::string(k == 0 ? "; option " : ", ") + v.options[k].name;
    }
    text += "\n";
  }
  text += "set by the library itself (do not set):";
  for (const Variable& v : known_variables()) {
    if (v.kind == VariableKind::kInternal) text += std::string(" ") + v.name;
  }
  text += "\ntooling variables, ignored by the library:";
  size_t column = 100;
  for (const Variable& v : known_variables()) {
    if (v.kind != VariableKind::kTooling) continue;
    const size_t length = std::string_view(v.name).size();
    if (column + length > 100) {
      text += "\n ";
      column = 1;
    }
    text += std::string(" ") + v.name;
    column += 1 + length;
  }
  text += "\nany other name starting with APPENDGUARD stops an enabled program with status 2.\n";
  return text;
}

LaunchParse parse_run_arguments(const std::vector<std::string>& args, const std::string& library,
                                const std::string& existing_preload, const std::string& existing_mode) {
  LaunchParse result;
  // The environment's APPENDGUARD, by the table's parser: audit stays audit, anything else valid enforces.
  const Variable& mode_row = known_variables().front();
  Config existing;
  if (!mode_row.parse(existing_mode, mode_row, existing).empty()) {
    result.error = "appendguard run: invalid APPENDGUARD='" + existing_mode +
                   "' in the environment: accepted: " + mode_row.accepted +
                   " (unset or inert, the launcher enforces)";
    return result;
  }
  std::string mode = existing.mode == Mode::kAudit ? "audit" : "enforce";
  std::vector<std::pair<std::string, std::string>> settings;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (FoundOption found = find_option(std::string_view(arg).substr(0, arg.find('='))); found.option) {
      const size_t eq = arg.find('=');
      std::string value;
      if (!found.option->argument) {
        if (eq != std::string::npos) {
          result.error = "appendguard run: option '" + arg + "' takes no value";
          return result;
        }
        value = found.option->sets;
      } else if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        result.error = "appendguard run: option '" + arg + "' needs a value";
        return result;
      }
      if (found.variable == &mode_row) {
        mode = value;  // always set below: the launcher enables the library
      } else {
        settings.emplace_back(found.variable->name, value);
      }
    } else if (arg.starts_with('-')) {
      result.error = "appendguard run: unknown option '" + arg + "': accepted: " + accepted_options();
      return result;
    } else {
      break;  // the command starts here ("--" is optional)
    }
  }
  if (i >= args.size()) {
    result.error = "appendguard run: no command given: usage: appendguard run [OPTIONS] -- COMMAND [ARGS...]";
    return result;
  }
  result.plan.command.assign(args.begin() + static_cast<long>(i), args.end());
  std::string preload = library;
  if (!existing_preload.empty()) preload += ":" + existing_preload;
  result.plan.environment.emplace_back("LD_PRELOAD", preload);
  result.plan.environment.emplace_back("APPENDGUARD", mode);
  for (auto& setting : settings) result.plan.environment.push_back(std::move(setting));
  return result;
}

}  // namespace appendguard

namespace appendguard {
namespace {

std::string base_name(const std::string& path) {
  return path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
}

// LD_PRELOAD and every library setting the command's environment holds: what a worker needs.
std::vector<std::string> needed_variables(const LauncherContext& context) {
  std::vector<std::string> names{"LD_PRELOAD"};
  for (const auto& [name, value] : context.environment) {
    const Variable* v = find_variable(name);
    if (v && v->kind == VariableKind::kSetting) names.push_back(name);
  }
  return names;
}

// The value of `--name=V` or `--name V` in args (the last one given), or nullopt.
std::optional<std::string> option_value(const std::vector<std::string>& args, std::string_view name) {
  std::optional<std::string> value;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == name && i + 1 < args.size()) {
      value = args[++i];
    } else if (arg.size() > name.size() && arg.starts_with(name) && arg[name.size()] == '=') {
      value = std::string(arg.substr(name.size() + 1));
    }
  }
  return value;
}

bool has_word(const std::vector<std::string>& args, std::string_view word) {
  return std::find(args.begin() + 1, args.end(), word) != args.end();
}

// The needed names missing from `passed` (names, with or without "=value").
std::vector<std::string> missing_from(const std::vector<std::string>& needed,
                                      const std::vector<std::string>& passed) {
  std::vector<std::string> missing;
  for (const std::string& name : needed) {
    bool found = std::any_of(passed.begin(), passed.end(),
                             [&](const std::string& p) { return p.substr(0, p.find('=')) == name; });
    if (!found) missing.push_back(name);
  }
  return missing;
}

std::string joined(const std::vector<std::string>& words, std::string_view prefix,
                   std::string_view separator) {
  std::string text;
  for (const std::string& w : words)
    text += (text.empty() ? "" : std::string(separator)) + std::string(prefix) + w;
  return text;
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    parts.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// Open MPI forwards to ranks on other nodes only what -x names (or the MCA parameter mca_base_env_list).
std::string open_mpi_warning(const std::vector<std::string>& command, const LauncherContext& context) {
  std::vector<std::string> exported;
  for (size_t i = 1; i + 1 < command.size(); ++i) {
    if (command[i] == "-x" || command[i] == "--x") exported.push_back(command[++i]);
    if ((command[i] == "--mca" || command[i] == "-mca") && i + 2 < command.size() &&
        command[i + 1] == "mca_base_env_list") {
      for (std::string& name : split(command[i + 2], ';')) exported.push_back(std::move(name));
    }
  }
  if (auto it = context.environment.find("OMPI_MCA_mca_base_env_list"); it != context.environment.end()) {
    for (std::string& name : split(it->second, ';')) exported.push_back(std::move(name));
  }
  std::vector<std::string> missing = missing_from(needed_variables(context), exported);
  if (missing.empty()) return {};
  return "appendguard run: warning: Open MPI's " + base_name(command[0]) +
         " passes to ranks on other nodes only the variables named with -x: add " +
         joined(missing, "-x ", " ") + ", or start each rank with `" + base_name(command[0]) +
         " ... appendguard run -- COMMAND` (docs/launching.md)";
}

// srun and sbatch pass the whole environment unless --export (or SLURM_EXPORT_ENV / SBATCH_EXPORT) says
// otherwise.
std::string slurm_warning(const std::vector<std::string>& command, const LauncherContext& context) {
  const std::string name = base_name(command[0]);
  std::optional<std::string> exports = option_value(command, "--export");
  const char* variable = name == "sbatch" ? "SBATCH_EXPORT" : "SLURM_EXPORT_ENV";
  if (!exports) {
    auto it = context.environment.find(variable);
    if (it == context.environment.end()) return {};
    exports = it->second;
  }
  std::vector<std::string> listed = split(*exports, ',');
  if (exports->empty() || std::find(listed.begin(), listed.end(), "ALL") != listed.end()) return {};
  std::vector<std::string> missing = missing_from(needed_variables(context), listed);
  if (missing.empty()) return {};
  return "appendguard run: warning: " + name + " with export list '" + *exports + "' (" +
         (option_value(command, "--export") ? std::string("--export") : std::string(variable)) +
         ") does not pass " + joined(missing, "", ", ") +
         " to the job: use --export=ALL or add them to the list "
         "(docs/launching.md)";
}

// DeepSpeed's single-node launcher passes the environment on; its multi-node runners (a hostfile,
// --force_multi, --num_nodes above 1) pass only some prefixes and the lines of .deepspeed_env.
std::string deepspeed_warning(const std::vector<std::string>& command, const LauncherContext& context) {
  if (has_word(command, "--no_ssh")) return {};
  std::optional<std::string> hostfile = option_value(command, "--hostfile");
  if (!hostfile) hostfile = option_value(command, "-H");
  std::optional<std::string> nodes = option_value(command, "--num_nodes");
  bool multi = has_word(command, "--force_multi") || (nodes && *nodes != "1" && *nodes != "-1") ||
               (hostfile && context.read_file(*hostfile)) ||
               (!hostfile && context.read_file("/job/hostfile"));
  if (!multi) return {};
  auto env_file = context.environment.find("DS_ENV_FILE");
  const std::string file_name = env_file == context.environment.end() ? ".deepspeed_env" : env_file->second;
  std::vector<std::string> listed;
  auto home = context.environment.find("HOME");
  for (const std::string& dir :
       {home == context.environment.end() ? std::string() : home->second, std::string(".")}) {
    if (dir.empty()) continue;
    std::string path = dir;
    path.append("/").append(file_name);
    if (std::optional<std::string> text = context.read_file(path)) {
      for (std::string& line : split(*text, '\n')) listed.push_back(std::move(line));
    }
  }
  std::vector<std::string> missing = missing_from(needed_variables(context), listed);
  if (missing.empty()) return {};
  return "appendguard run: warning: deepspeed's multi-node launcher passes on only some variables (NCCL_*, "
         "PYTHON*, "
         "...) and the NAME=VALUE lines of " +
         file_name + " in ~ or the working directory: add " + joined(missing, "", ", ") +
         " there (docs/launching.md)";
}

// `ray job submit` runs the job on the cluster, started by the cluster's processes, not by this one.
std::string ray_warning(const std::vector<std::string>& command, const LauncherContext& context) {
  if (command.size() < 3 || command[1] != "job" || command[2] != "submit") return {};
  std::string runtime_env = option_value(command, "--runtime-env-json").value_or("");
  if (std::optional<std::string> file = option_value(command, "--runtime-env")) {
    runtime_env += context.read_file(*file).value_or("");
  }
  std::vector<std::string> missing;
  for (const std::string& name : needed_variables(context)) {
    if (runtime_env.find('"' + name + '"') == std::string::npos &&
        runtime_env.find(name + ":") == std::string::npos) {
      missing.push_back(name);
    }
  }
  if (missing.empty()) return {};
  return "appendguard run: warning: `ray job submit` runs the job on the cluster, which does not inherit "
         "this "
         "environment: give " +
         joined(missing, "", ", ") +
         " in its runtime env's env_vars "
         "(--runtime-env-json; docs/launching.md)";
}

}  // namespace

std::string launcher_warning(const std::vector<std::string>& command, const LauncherContext& context) {
  if (command.empty()) return {};
  const std::string name = base_name(command[0]);
  const std::string program = context.program.empty() ? command[0] : context.program;
  if (name == "mpirun" || name == "mpiexec" || name == "orterun" || name == "prterun" || name == "oshrun") {
    // MPICH's and Intel MPI's Hydra pass the whole environment on by default.
    for (const char* hydra : {"mpich", "hydra", "intel", "impi"}) {
      if (program.find(hydra) != std::string::npos) return {};
    }
    return open_mpi_warning(command, context);
  }
  if (name == "srun" || name == "sbatch") return slurm_warning(command, context);
  if (name == "deepspeed") return deepspeed_warning(command, context);
  if (name == "ray") return ray_warning(command, context);
  return {};
}

}  // namespace appendguard
