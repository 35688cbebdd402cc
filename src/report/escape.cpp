#include "report/escape.h"

namespace appendguard {

namespace {

enum class ControlStyle { kHexByte, kJsonUnicode };  // \x1b (reports) or \u001b (JSON)

// Backslash escapes for \\, ", \n, \t, \r; other control bytes in `style`; the rest as they are.
void add_escaped(TextBuffer& out, std::string_view text, ControlStyle style, bool controls_only = false) {
  constexpr char kHex[] = "0123456789abcdef";
  size_t written = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    auto byte = static_cast<unsigned char>(c);
    if (written + 12 > kMaxEscapedText) {  // the longest escape: \xe2\x80\xae
      out.add("...[+{}]", text.size() - i);
      return;
    }
    const size_t before = out.view().size();
    if (c == '\\' && !controls_only) {
      out.add_text("\\\\");
    } else if (c == '"' && !controls_only) {
      out.add_text("\\\"");
    } else if (c == '\n') {
      out.add_text("\\n");
    } else if (c == '\t') {
      out.add_text("\\t");
    } else if (c == '\r') {
      out.add_text("\\r");
    } else if (const unsigned code = byte == 0xe2 ? direction_control_at(text, i) : 0) {
      if (style == ControlStyle::kHexByte) {
        for (int k = 0; k < 3; ++k) {
          const auto b = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
          char hex[4] = {'\\', 'x', kHex[b >> 4], kHex[b & 15]};
          out.add_text({hex, 4});
        }
      } else {
        char hex[6] = {'\\',           'u', kHex[code >> 12], kHex[(code >> 8) & 15], kHex[(code >> 4) & 15],
                       kHex[code & 15]};
        out.add_text({hex, 6});
      }
      i += 2;
    } else if (byte < 0x20 || byte == 0x7f) {
      if (style == ControlStyle::kHexByte) {
        char hex[4] = {'\\', 'x', kHex[byte >> 4], kHex[byte & 15]};
        out.add_text({hex, 4});
      } else {
        char hex[6] = {'\\', 'u', '0', '0', kHex[byte >> 4], kHex[byte & 15]};
        out.add_text({hex, 6});
      }
    } else {
      out.add_text({&c, 1});
    }
    written += out.view().size() - before;
  }
}

}  // namespace

void add_escaped_path(TextBuffer& out, std::string_view path, bool quote) {
  for (char c : path) {
    if (c == ' ' || c == '"') quote = true;
  }
  if (quote) out.add_text("\"");
  add_escaped(out, path, ControlStyle::kHexByte);
  if (quote) out.add_text("\"");
}

void add_escaped_text(TextBuffer& out, std::string_view text) {
  add_escaped(out, text, ControlStyle::kHexByte);
}

void add_one_line(TextBuffer& out, std::string_view text) {
  add_escaped(out, text, ControlStyle::kHexByte, true);
}

void add_json_string(TextBuffer& out, std::string_view text) {
  out.add_text("\"");
  add_escaped(out, text, ControlStyle::kJsonUnicode);
  out.add_text("\"");
}

void add_json_lines(TextBuffer& out, std::string_view text) {
  out.add_text("[");
  bool first = true;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    size_t start = line.find_first_not_of(' ');
    if (start == std::string_view::npos) continue;
    if (!first) out.add_text(",");
    first = false;
    add_json_string(out, line.substr(start));
  }
  out.add_text("]");
}

}  // namespace appendguard
