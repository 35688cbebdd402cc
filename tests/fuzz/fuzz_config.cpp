// parse_config over an environment made of the input's NAME=VALUE lines (a fake getenv): any input either
// parses or gives one line naming the variable, its value and what is accepted.
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "fuzz_support.h"

namespace {

std::vector<std::pair<std::string, std::string>> g_env;

const char* fake_getenv(const char* name) {
  for (const auto& [key, value] : g_env) {
    if (key == name) return value.c_str();
  }
  return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  g_env.clear();
  for (std::string_view line : fuzz::split(fuzz::as_text(data, size), '\n')) {
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    std::string value(line.substr(eq + 1));
    if (value.find('\0') != std::string::npos) continue;  // getenv cannot return one
    g_env.emplace_back(std::string(line.substr(0, eq)), std::move(value));
  }
  appendguard::ConfigResult result = appendguard::parse_config(fake_getenv);
  if (!result.ok()) {
    FUZZ_CHECK(result.error.rfind("appendguard: invalid APPENDGUARD", 0) == 0);
    FUZZ_CHECK(result.error.find("accepted") != std::string::npos);
    FUZZ_CHECK(result.error.find('\n') == std::string::npos);
  } else if (result.config.mode != appendguard::Mode::kOff) {
    int err = result.config.violation_errno;
    FUZZ_CHECK(err > 0 && err < 4096);
    FUZZ_CHECK(err != EINTR && err != EAGAIN);
    FUZZ_CHECK(result.config.paths.size() > 0);
  }
  return 0;
}
