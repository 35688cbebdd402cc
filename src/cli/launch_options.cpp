#include "cli/launch_options.h"

#include <algorithm>
#include <string_view>

#include "core/config.h"
#include "core/variables.h"

namespace appendguard {
namespace {

// The row whose option is `option` (without "=value"), else nullptr.
const Variable* variable_of_flag(std::string_view option) {
  for (const Variable& v : known_variables()) {
    if (v.flag && option == v.flag) return &v;
  }
  return nullptr;
}

std::string accepted_options() {
  std::string text = "--enforce, --audit";
  for (const Variable& v : known_variables()) {
    if (!v.flag) continue;
    text += ", ";
    text += v.flag;
    if (v.flag_arg) text += std::string(" ") + v.flag_arg;
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
  text += option_line("--enforce",
                      "rewrite read-write opens into appends, refuse writes not at the end (default)");
  text += option_line("--audit", "change nothing; report every operation an append-only mount would refuse");
  for (const Variable& v : known_variables()) {
    if (!v.flag) continue;
    text += option_line(std::string(v.flag) + (v.flag_arg ? std::string(" ") + v.flag_arg : ""),
                        v.flag_help ? v.flag_help : v.help);
  }
  text +=
      "A static, Go, set-uid or set-gid COMMAND cannot be reached by the library: one line says so before "
      "it\n"
      "starts.\n";

  text += "\nenvironment (docs/reference.md):\n";
  for (const Variable& v : known_variables()) {
    if (v.kind != VariableKind::kSetting) continue;
    text += option_line(v.name, v.help, 28);
    text += std::string(28, ' ') + "accepted: " + v.accepted;
    if (*v.default_value) text += std::string("; default ") + v.default_value;
    if (v.flag) text += std::string("; option ") + v.flag;
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
    if (arg == "--audit") {
      mode = "audit";
    } else if (arg == "--enforce") {
      mode = "enforce";
    } else if (const Variable* v = variable_of_flag(std::string_view(arg).substr(0, arg.find('=')))) {
      const size_t eq = arg.find('=');
      if (!v->flag_arg) {
        if (eq != std::string::npos) {
          result.error = "appendguard run: option '" + arg + "' takes no value";
          return result;
        }
        settings.emplace_back(v->name, v->flag_sets);
      } else if (eq != std::string::npos) {
        settings.emplace_back(v->name, arg.substr(eq + 1));
      } else if (i + 1 < args.size()) {
        settings.emplace_back(v->name, args[++i]);
      } else {
        result.error = "appendguard run: option '" + arg + "' needs a value";
        return result;
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
