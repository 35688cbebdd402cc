// The one table of environment variable names that start with APPENDGUARD: the library's settings, its
// internal variable, and the names our build, test and launcher tooling use (which the library ignores).
// The library refuses any other APPENDGUARD* name when it is enabled (a misspelt APPENDGUARD_PATH would
// otherwise leave a job silently unguarded). Each setting's row also holds its parser (parse_config runs
// them in table order), its `appendguard run` option if it has one (cli/launch_options.cpp) and the text
// of `appendguard run --help`; docs/reference.md lists the same names (tests/integration/test_variables.py
// and tests/unit/test_variables.cpp check that table, usage and docs agree).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace appendguard {

enum class VariableKind {
  kSetting,   // read by the library when APPENDGUARD is enabled
  kInternal,  // set and read by the library itself (do not set)
  kTooling,   // used by the launcher, the build or the tests; ignored by the library
};

struct Config;
struct Variable;

// Parses a set value into `config` (whose earlier rows are already parsed). Returns "" when accepted,
// else what follows "invalid NAME='VALUE': " in the error line: usually rejected(self) ("accepted: ...").
using ParseSetting = std::string (*)(std::string_view value, const Variable& self, Config& config);

// An `appendguard run` option that sets a variable: `--paths P` sets it to the option's value; a switch
// (`argument` null) sets it to `sets`.
struct LaunchOption {
  const char* name;
  const char* argument = nullptr;
  const char* sets = nullptr;
  const char* help = "";  // the option's line in `appendguard run --help`
};

struct Variable {
  const char* name;
  VariableKind kind;
  const char* accepted;                        // the values accepted: error lines, usage text
  const char* default_value;                   // "" when none
  const char* help;                            // one line
  ParseSetting parse = nullptr;                // settings only
  std::span<const LaunchOption> options = {};  // the launcher's options for it (cli/launch_options.cpp)
};

// "accepted: " + self.accepted, after `why` and "; " when given.
std::string rejected(const Variable& self, std::string_view why = {});

std::span<const Variable> known_variables();
// Whether APPENDGUARD=`value` leaves the library inert (unset counts as off too); an exec into an
// environment where it does is told apart by the shim (exec_check.h).
bool mode_value_is_off(std::string_view value);
const Variable* find_variable(std::string_view name);  // nullptr when not in the table

// True for names the check applies to: they start with "APPENDGUARD".
bool is_our_prefix(std::string_view name);

// The setting whose name is closest (Levenshtein distance) to `name`.
const Variable& closest_setting(std::string_view name);

// What an unknown name most likely meant: a setting within two edits of the name ("APPENDGUARD_PATHS"),
// else a setting one of whose accepted words `value` is a near misspelling of, with that word
// ("APPENDGUARD=enforce" for APPENDGUARD_MODE=enforcee); "" when neither.
std::string suggest_setting(std::string_view name, std::string_view value);

// Checks the names of `environment` (NAME=VALUE entries, null-terminated like environ). Returns an empty
// string when every APPENDGUARD* name is in the table, else one line naming the first unknown one, its
// value and what it most likely meant (suggest_setting).
std::string check_variable_names(const char* const* environment);

// The settings (kind kSetting, APPENDGUARD itself excluded) present in `environment`, comma-separated, for
// the line said when the library is loaded but APPENDGUARD is unset: "" when there are none.
std::string settings_present(const char* const* environment);

// The APPENDGUARD* entries of an environment, gathered in one pass over it (issue 27: a getenv per
// variable scanned the whole environment some forty times in every new process).
struct OurEnvironment {
  static constexpr size_t kCapacity = 64;
  const char* entries[kCapacity] = {};  // NAME=VALUE, in the environment's order
  size_t count = 0;
  bool overflow = false;  // more than kCapacity: value_of cannot answer (the caller asks getenv)

  // Gathers `environment`'s APPENDGUARD* entries (null: none).
  void gather(const char* const* environment);
  // `name`'s value, the first entry's as getenv gives it; null when absent. `name` must begin with
  // APPENDGUARD and overflow must be false.
  const char* value_of(const char* name) const;
};

size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace appendguard
