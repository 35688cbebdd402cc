#include "cli/launch_options.h"

#include <map>

namespace appendguard {
namespace {

// Options that take a value, and the variable each one sets.
const std::map<std::string, std::string>& valued_options() {
  static const std::map<std::string, std::string> options = {
      {"--paths", "APPENDGUARD_PATHS"},         {"--on-violation", "APPENDGUARD_ON_VIOLATION"},
      {"--errno", "APPENDGUARD_ERRNO"},         {"--log", "APPENDGUARD_LOG"},
      {"--backtrace", "APPENDGUARD_BACKTRACE"}, {"--reopen", "APPENDGUARD_REOPEN"},
  };
  return options;
}

}  // namespace

LaunchParse parse_run_arguments(const std::vector<std::string>& args, const std::string& library,
                                const std::string& existing_preload, const std::string& existing_mode) {
  LaunchParse result;
  std::string mode = existing_mode == "audit" ? "audit" : "enforce";
  for (const char* accepted : {"", "0", "off", "1", "on", "enforce", "audit"}) {
    if (existing_mode == accepted) break;
    if (std::string(accepted) == "audit") {  // none matched
      result.error = "appendguard run: invalid APPENDGUARD='" + existing_mode +
                     "' in the environment: accepted: unset, 0, off, 1, on, enforce (the launcher enforces), "
                     "audit";
      return result;
    }
  }
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
    } else if (arg == "--trace") {
      settings.emplace_back("APPENDGUARD_TRACE", "1");
    } else if (arg == "--no-python-stack") {
      settings.emplace_back("APPENDGUARD_PYTHON_STACK", "0");
    } else if (auto eq = arg.find('=');
               arg.rfind("--", 0) == 0 && valued_options().count(arg.substr(0, eq))) {
      const std::string& variable = valued_options().at(arg.substr(0, eq));
      if (eq != std::string::npos) {
        settings.emplace_back(variable, arg.substr(eq + 1));
      } else if (i + 1 < args.size()) {
        settings.emplace_back(variable, args[++i]);
      } else {
        result.error = "appendguard run: option '" + arg + "' needs a value";
        return result;
      }
    } else if (arg.starts_with('-')) {
      result.error =
          "appendguard run: unknown option '" + arg +
          "': accepted: --enforce, --audit, --trace, --paths P, --on-violation error|abort|warn, "
          "--errno E, --log L, --backtrace N, --reopen append|rewrite, --no-python-stack, then -- COMMAND";
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
