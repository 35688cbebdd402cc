// How paths appear in reports and trace lines, so that a file name can neither forge a line nor split a
// field (docs/reference.md, "Paths in reports"): backslash, double quote and control characters are
// C-escaped (\\ \" \n \t \r, else \xHH), and a path containing a space or a double quote (or any path
// when `quote` is set) is written between double quotes. `appendguard report` reads it back.
#pragma once

#include <string_view>

#include "report/text_buffer.h"

namespace appendguard {

void add_escaped_path(TextBuffer& out, std::string_view path, bool quote = false);

}  // namespace appendguard
