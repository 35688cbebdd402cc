#include "cli/launch_options.h"

#include <algorithm>
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

  text += "\nenvironment (docs/reference.md):\n";
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
