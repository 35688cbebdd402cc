// normalize_path on BASE\nPATH into a buffer whose capacity the first byte picks: the result is absolute,
// NUL-terminated inside the buffer, has no empty, "." or ".." component, and normalizes to itself.
#include <cstring>
#include <string>
#include <vector>

#include "core/path.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t capacity = data[0] < 200 ? data[0] : 4096;
  std::string_view input = fuzz::as_text(data + 1, size - 1);
  size_t newline = input.find('\n');
  std::string_view base = input.substr(0, newline);
  std::string_view path = newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);
  std::vector<char> out(capacity + 1, '#');
  size_t length = appendguard::normalize_path(base, path, out.data(), capacity);
  FUZZ_CHECK(out[capacity] == '#');
  if (length == 0) return 0;
  FUZZ_CHECK(length < capacity && out[length] == '\0');
  std::string_view result(out.data(), length);
  FUZZ_CHECK(result[0] == '/');
  FUZZ_CHECK(result.find('\0') == std::string_view::npos || path.find('\0') != std::string_view::npos ||
             base.find('\0') != std::string_view::npos);
  if (length > 1) FUZZ_CHECK(result.back() != '/');
  for (std::string_view component : fuzz::split(result.substr(1), '/')) {
    if (length > 1) FUZZ_CHECK(!component.empty());
    FUZZ_CHECK(component != "." && component != "..");
  }
  std::vector<char> again(capacity + 1, '#');
  size_t again_length = appendguard::normalize_path("/", result, again.data(), capacity);
  FUZZ_CHECK(again_length == length && std::memcmp(again.data(), out.data(), length) == 0);
  return 0;
}
