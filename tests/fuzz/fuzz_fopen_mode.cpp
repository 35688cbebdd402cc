// parse_fopen_mode and rewrite_fopen_mode on any NUL-terminated mode string: the rewrite fits its
// buffer, keeps the length, and leaves a mode that neither reads nor writes anywhere but the end.
#include <cstring>
#include <string>

#include "core/fopen_mode.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t capacity = data[0] % 16 + 1;  // small buffers too
  std::string mode(reinterpret_cast<const char*>(data + 1), size - 1);
  const char* text = mode.c_str();  // stops at the first NUL, as fopen's caller's string would
  appendguard::FopenMode parsed = appendguard::parse_fopen_mode(text);
  FUZZ_CHECK(parsed.valid == (text[0] == 'r' || text[0] == 'w' || text[0] == 'a'));
  FUZZ_CHECK(std::strlen(appendguard::cookie_stream_mode(parsed)) <= 2);
  char out[17];
  std::memset(out, '#', sizeof out);
  bool rewritten = appendguard::rewrite_fopen_mode(text, out, capacity);
  size_t length = std::strlen(text);
  FUZZ_CHECK(rewritten == (parsed.valid && length + 1 <= capacity));
  if (!rewritten) return 0;
  FUZZ_CHECK(out[length] == '\0' && std::strlen(out) == length);
  FUZZ_CHECK(out[capacity] == '#' || capacity == sizeof out);
  appendguard::FopenMode after = appendguard::parse_fopen_mode(out);
  FUZZ_CHECK(after.valid && !after.plus);
  if (parsed.plus) FUZZ_CHECK(after.kind == 'a' || after.kind == 'w');
  FUZZ_CHECK(after.exclusive == parsed.exclusive && after.cloexec == parsed.cloexec);
  return 0;
}
