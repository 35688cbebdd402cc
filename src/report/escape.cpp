#include "report/escape.h"

namespace appendguard {

void add_escaped_path(TextBuffer& out, std::string_view path, bool quote) {
  for (char c : path) {
    if (c == ' ' || c == '"') quote = true;
  }
  if (quote) out.add_text("\"");
  constexpr char kHex[] = "0123456789abcdef";
  for (char c : path) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '\\') {
      out.add_text("\\\\");
    } else if (c == '"') {
      out.add_text("\\\"");
    } else if (c == '\n') {
      out.add_text("\\n");
    } else if (c == '\t') {
      out.add_text("\\t");
    } else if (c == '\r') {
      out.add_text("\\r");
    } else if (byte < 0x20 || byte == 0x7f) {
      char hex[4] = {'\\', 'x', kHex[byte >> 4], kHex[byte & 15]};
      out.add_text({hex, 4});
    } else {
      out.add_text({&c, 1});
    }
  }
  if (quote) out.add_text("\"");
}

}  // namespace appendguard
