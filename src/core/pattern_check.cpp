#include "core/pattern_check.h"

namespace appendguard {
namespace {

bool is_wildcard(char c) {
  return c == '*' || c == '?' || c == '[' || c == '\\';
}

bool has_wildcard(std::string_view pattern) {
  for (char c : pattern) {
    if (is_wildcard(c)) return true;
  }
  return false;
}

bool ends_with(std::string_view text, std::string_view end) {
  return text.size() >= end.size() && text.substr(text.size() - end.size()) == end;
}

// ',' outside a bracket expression.
bool has_comma(std::string_view pattern) {
  bool in_bracket = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\') {
      ++i;
    } else if (!in_bracket && c == '[') {
      in_bracket = true;
      if (i + 1 < pattern.size() && (pattern[i + 1] == '!' || pattern[i + 1] == '^')) ++i;
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') ++i;  // "[]...]": the first ']' is literal
    } else if (in_bracket && c == ']') {
      in_bracket = false;
    } else if (!in_bracket && c == ',') {
      return true;
    }
  }
  return false;
}

bool has_unexpanded_variable(std::string_view pattern) {
  for (size_t i = 0; i + 1 < pattern.size(); ++i) {
    char next = pattern[i + 1];
    if (pattern[i] == '$' &&
        (next == '{' || next == '_' || (next >= 'A' && next <= 'Z') || (next >= 'a' && next <= 'z'))) {
      return true;
    }
  }
  return false;
}

// The literal characters after the last wildcard.
std::string_view literal_ending(std::string_view pattern) {
  size_t start = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (is_wildcard(pattern[i]) || pattern[i] == ']') start = i + 1;
  }
  return pattern.substr(start);
}

bool is_blank_or_quote(char c) {
  return c == ' ' || c == '\t' || c == '\'' || c == '"';
}

}  // namespace

std::string pattern_problem(std::string_view pattern, IsDirectory is_directory) {
  const std::string text(pattern);
  bool full_path = pattern.find('/') != std::string_view::npos;
  if (full_path && pattern.back() == '/') {
    return "cannot match any file: it ends with '/' and a file's path never does; for the files below "
           "that directory write '" +
           text + "**'";
  }
  if (full_path) {
    for (std::string_view piece : {"//", "/./", "/../"}) {
      if (pattern.find(piece) != std::string_view::npos) {
        return "cannot match any file: it contains '" + std::string(piece) +
               "' and paths are matched normalized, without it";
      }
    }
    for (std::string_view piece : {"/.", "/.."}) {
      if (ends_with(pattern, piece)) {
        return "cannot match any file: it ends with '" + std::string(piece) +
               "' and paths are matched normalized, without it";
      }
    }
  }
  if (!has_wildcard(pattern) && is_directory && is_directory(text.c_str())) {
    std::string below = full_path ? text + "/**" : "/ABSOLUTE/PATH/TO/" + text + "/**";
    return "names a directory: it matches only that name, never the files in it; for them write '" + below +
           "'";
  }
  if (has_comma(pattern)) {
    return "contains ',': patterns are separated by ':', so this is one pattern matching only names with a "
           "comma; for a list write them with ':' between";
  }
  if (is_blank_or_quote(pattern.front()) || is_blank_or_quote(pattern.back())) {
    return "starts or ends with a space or a quote, which is part of the pattern (quotes copied into an "
           "env file or a YAML value are not removed)";
  }
  if (has_unexpanded_variable(pattern)) {
    return "contains '$' and a name: a shell variable that was not expanded (single quotes, an env file)";
  }
  std::string_view ending = literal_ending(pattern);
  for (std::string_view known : {".safetensors", ".distcp"}) {
    if (ending.size() >= 4 && ending.front() == '.' && ending.size() < known.size() &&
        known.substr(0, ending.size()) == ending) {
      return "matches names ending in '" + std::string(ending) + "', not '" + std::string(known) +
             "': misspelt?";
    }
  }
  return {};
}

std::vector<std::string> pattern_notices(std::string_view spec, IsDirectory is_directory) {
  std::vector<std::string> notices;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t colon = spec.find(':', start);
    std::string_view pattern =
        spec.substr(start, colon == std::string_view::npos ? spec.npos : colon - start);
    if (!pattern.empty()) {
      std::string why = pattern_problem(pattern, is_directory);
      if (!why.empty()) {
        notices.push_back("appendguard: APPENDGUARD_PATHS pattern '" + std::string(pattern) + "' " + why);
      }
    }
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  return notices;
}

}  // namespace appendguard
