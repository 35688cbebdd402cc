// A reader for the JSON objects the library writes (APPENDGUARD_FORMAT=json, one per line): objects,
// arrays, strings, numbers, true, false, null. Pure; used by `appendguard report`.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace appendguard {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = Kind::kNull;
  std::string text;  // a string's decoded bytes; a number's or a boolean's literal
  std::string raw;   // the value as written in the input (for a string: with its quotes and escapes)
  std::vector<JsonValue> items;
  // An object's members, in order: names[i] is the name of values[i].
  std::vector<std::string> names;
  std::vector<JsonValue> values;

  // The member `name` of an object, or nullptr.
  const JsonValue* find(std::string_view name) const;
  // The member `name` when it is a string or a number, else "".
  std::string text_of(std::string_view name) const;
};

// The value that is the whole of `text` (surrounding white space allowed), or nullopt when `text` is
// not one JSON value. Escapes \uXXXX below 0x100 become that byte (the library writes a path's bytes
// as they are and escapes only control characters); above, UTF-8.
std::optional<JsonValue> parse_json(std::string_view text);

// The value of a hexadecimal digit, or -1 (for \uXXXX here and \xHH in text reports).
int hex_digit_value(char c);

}  // namespace appendguard
