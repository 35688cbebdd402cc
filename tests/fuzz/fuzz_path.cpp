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
  // A guarded open's shortcuts (issue 27) make what normalize_path makes, or nothing: the copy of an
  // absolute path already normal, and a relative one joined in place to its base.
  std::vector<char> copy(path.size() + 2, '#');
  if (appendguard::copy_plainly_normal_absolute(path, copy.data())) {
    FUZZ_CHECK(copy[path.size()] == '\0' && copy[path.size() + 1] == '#');
    FUZZ_CHECK(std::memcmp(copy.data(), path.data(), path.size()) == 0);
    FUZZ_CHECK(path.size() + 1 > capacity || length == path.size());
  }
  if (base.size() <= capacity) {
    std::vector<char> joined(capacity + 1, '#');
    std::memcpy(joined.data(), base.data(), base.size());
    const size_t made = appendguard::join_plainly_normal(joined.data(), base.size(), path, capacity);
    FUZZ_CHECK(joined[capacity] == '#');
    if (made != 0) FUZZ_CHECK(made == length && std::memcmp(joined.data(), out.data(), length + 1) == 0);
  }
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
