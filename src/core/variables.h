// The one table of environment variable names that start with APPENDGUARD: the library's settings, its
// internal variable, and the names our build, test and launcher tooling use (which the library ignores).
// The library refuses any other APPENDGUARD* name when it is enabled (a misspelt APPENDGUARD_PATH would
// otherwise leave a job silently unguarded); the launcher's usage text and docs/reference.md list the same
// table (tests/integration/test_variables.py checks the docs).
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

struct Variable {
  const char* name;
  VariableKind kind;
  const char* accepted;       // the values accepted, for usage text and docs
  const char* default_value;  // "" when none
  const char* help;           // one line
};

std::span<const Variable> known_variables();
const Variable* find_variable(std::string_view name);  // nullptr when not in the table

// True for names the check applies to: they start with "APPENDGUARD".
bool is_our_prefix(std::string_view name);

// The setting whose name is closest (Levenshtein distance) to `name`.
const Variable& closest_setting(std::string_view name);

// Checks the names of `environment` (NAME=VALUE entries, null-terminated like environ). Returns an empty
// string when every APPENDGUARD* name is in the table, else one line naming the first unknown one and the
// closest valid name.
std::string check_variable_names(const char* const* environment);

// The settings (kind kSetting, APPENDGUARD itself excluded) present in `environment`, comma-separated, for
// the line said when the library is loaded but APPENDGUARD is unset: "" when there are none.
std::string settings_present(const char* const* environment);

size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace appendguard
