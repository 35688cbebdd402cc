// How paths appear in reports and trace lines, so that a file name can neither forge a line nor split a
// field (docs/reference.md, "Paths in reports"): backslash, double quote and control characters are
// C-escaped (\\ \" \n \t \r, else \xHH), and a path containing a space or a double quote (or any path
// when `quote` is set) is written between double quotes. `appendguard report` reads it back.
#pragma once

#include <string_view>

#include "report/text_buffer.h"

namespace appendguard {

void add_escaped_path(TextBuffer& out, std::string_view path, bool quote = false);

// A JSON string (APPENDGUARD_FORMAT=json): between double quotes, with \" \\ \n \t \r and \u00XX for
// the other control characters; other bytes as they are.
void add_json_string(TextBuffer& out, std::string_view text);

// `text`'s lines as a JSON array of strings, each without its leading spaces; empty lines left out.
void add_json_lines(TextBuffer& out, std::string_view text);

}  // namespace appendguard
