#include "cli/printable.h"

namespace appendguard {

unsigned direction_control(std::string_view text, size_t i) {
  if (i + 2 >= text.size() || static_cast<unsigned char>(text[i]) != 0xe2) return 0;
  const auto second = static_cast<unsigned char>(text[i + 1]);
  const auto third = static_cast<unsigned char>(text[i + 2]);
  if ((second & 0xc0) != 0x80 || (third & 0xc0) != 0x80) return 0;
  const unsigned code = 0x2000u + ((second & 0x3fu) << 6) + (third & 0x3fu);
  const bool control = code == 0x200e || code == 0x200f || (code >= 0x202a && code <= 0x202e) ||
                       (code >= 0x2066 && code <= 0x2069);
  return control ? code : 0;
}

std::string printable(std::string_view text) {
  size_t plain = 0;  // the common case: nothing to escape, one scan and one copy
  while (plain < text.size()) {
    const auto byte = static_cast<unsigned char>(text[plain]);
    if (byte < 0x20 || byte == 0x7f || byte == 0xe2) break;
    ++plain;
  }
  if (plain == text.size()) return std::string(text);
  constexpr char kHex[] = "0123456789abcdef";
  std::string out(text.substr(0, plain));
  out.reserve(text.size() + 16);
  auto hex = [&](unsigned char byte) {
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
  };
  for (size_t i = plain; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7f) {
      hex(byte);
    } else if (direction_control(text, i)) {
      for (size_t k = i; k < i + 3; ++k) hex(static_cast<unsigned char>(text[k]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace appendguard
