// An environment the configuration tests control: parse_config takes a lookup function, and this one
// reads fake_environment() instead of the process's variables.
#pragma once

#include <map>
#include <string>

namespace appendguard::testing {

inline std::map<std::string, std::string>& fake_environment() {
  static std::map<std::string, std::string> variables;
  return variables;
}

inline const char* fake_env(const char* name) {
  auto it = fake_environment().find(name);
  return it == fake_environment().end() ? nullptr : it->second.c_str();
}

}  // namespace appendguard::testing
