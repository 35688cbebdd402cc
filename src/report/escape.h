// How paths appear in reports and trace lines, so that a file name can neither forge a line nor split a
// field (docs/reference.md, "Paths in reports"): backslash, double quote and control characters are
// C-escaped (\\ \" \n \t \r, else \xHH), and a path containing a space or a double quote (or any path
// when `quote` is set) is written between double quotes. `appendguard report` reads it back.
#pragma once

#include <cstddef>
#include <string_view>

#include "report/text_buffer.h"

namespace appendguard {

void add_escaped_path(TextBuffer& out, std::string_view path, bool quote = false);

// The Unicode direction controls (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), which reorder what a
// terminal or a page shows: the code point whose UTF-8 starts at text[i], else 0. Escaped like control
// bytes: \xe2\x80\xae in text, \u202e in JSON.
inline unsigned direction_control_at(std::string_view text, size_t i) {
  if (i + 2 >= text.size() || static_cast<unsigned char>(text[i]) != 0xe2) return 0;
  const auto second = static_cast<unsigned char>(text[i + 1]);
  const auto third = static_cast<unsigned char>(text[i + 2]);
  const unsigned code = 0x2000u + ((second & 0x3fu) << 6) + (third & 0x3fu);
  if ((second & 0xc0) != 0x80 || (third & 0xc0) != 0x80) return 0;
  const bool control = code == 0x200e || code == 0x200f || (code >= 0x202a && code <= 0x202e) ||
                       (code >= 0x2066 && code <= 0x2069);
  return control ? code : 0;
}

// An escaped field (a path, a JSON string) is cut at this many characters of output, with
// "...[+N]" (N: the bytes of the text left out) before its closing quote: a path of control bytes
// (4 to 6 characters each once escaped) keeps its line within the line buffers, and so its newline.
constexpr size_t kMaxEscapedText = 8192;

// `text` escaped as a path is (\\ \" controls, direction controls), without quotes around it.
void add_escaped_text(TextBuffer& out, std::string_view text);

// Only the control bytes (and direction controls) of `text` escaped (\n \t \r \xHH): a notice's message stays
// one line.
void add_one_line(TextBuffer& out, std::string_view text);

// A JSON string (APPENDGUARD_FORMAT=json): between double quotes, with \" \\ \n \t \r and \u00XX for
// the other control characters; other bytes as they are.
void add_json_string(TextBuffer& out, std::string_view text);

// `text`'s lines as a JSON array of strings, each without its leading spaces; empty lines left out.
void add_json_lines(TextBuffer& out, std::string_view text);

}  // namespace appendguard
