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

// An escaped field (a path, a JSON string) is cut at this many characters of output, with
// "...[+N]" (N: the bytes of the text left out) before its closing quote: a path of control bytes
// (4 to 6 characters each once escaped) keeps its line within the line buffers, and so its newline.
constexpr size_t kMaxEscapedText = 8192;

// Only the control bytes of `text` escaped (\n \t \r \xHH): a notice's message stays one line.
void add_one_line(TextBuffer& out, std::string_view text);

// A JSON string (APPENDGUARD_FORMAT=json): between double quotes, with \" \\ \n \t \r and \u00XX for
// the other control characters; other bytes as they are.
void add_json_string(TextBuffer& out, std::string_view text);

// `text`'s lines as a JSON array of strings, each without its leading spaces; empty lines left out.
void add_json_lines(TextBuffer& out, std::string_view text);

}  // namespace appendguard
