// appendonlyfs's command line: arguments are the input's NUL-separated fields. Any command line runs,
// asks for help or the version, or is refused with one line.
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "options.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  if (size > 0) {
    for (std::string_view field : fuzz::split(fuzz::as_text(data, size), '\0')) args.emplace_back(field);
  }
  appendonlyfs::ParseResult result = appendonlyfs::parse_command_line(args);
  if (result.action == appendonlyfs::CommandAction::error) {
    FUZZ_CHECK(!result.error.empty());
    bool args_have_newline = false;
    for (const std::string& arg : args) args_have_newline |= arg.find('\n') != std::string::npos;
    FUZZ_CHECK(result.error.find('\n') == std::string::npos || args_have_newline);
  }
  return 0;
}
