// What `appendguard report` prints comes from logs, which anyone who can write a log (or name a file)
// shaped: control bytes (ESC, BEL, newlines) and Unicode direction controls are shown escaped (\x1b,
// \xe2\x80\xae), never sent to the terminal as they are.
#pragma once

#include <string>
#include <string_view>

namespace appendguard {

std::string printable(std::string_view text);

// Whether the UTF-8 at text[i] is a direction control (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069):
// its code point, else 0 (report/escape.h has the library's twin).
unsigned direction_control(std::string_view text, size_t i);

}  // namespace appendguard
