// Patterns of APPENDGUARD_PATHS that are well formed but cannot match the path of any file, or that
// almost certainly do not say what was meant: one line each at start-up (issue 10: a pattern matching
// nothing left jobs unguarded without a word). Pure but for the injected directory test.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace appendguard {

// Whether `path` (absolute, or relative to the working directory) is an existing directory.
using IsDirectory = bool (*)(const char* path);

// Why `pattern` (one valid pattern, core/glob.h) is suspect, as the end of a sentence starting with the
// pattern; empty when it is not. Precisely:
//  cannot match any file's path:
//   - it has '/' and ends with '/' (a file's path never does; matched paths are normalized);
//   - it has '/' and contains '//', '/./' or '/../', or ends with '/.' or '/..' (normalized paths do not);
//   - it has no wildcard and names an existing directory (`is_directory`): only the directory itself;
//  very likely not what was meant:
//   - it contains ',' outside '[...]' (a comma-separated list: the separator is ':');
//   - it starts or ends with a space or a tab, or with a quote character (' or ");
//   - it contains '$' followed by a letter, '_' or '{' (a shell variable left unexpanded);
//   - its literal ending is at least 4 characters, starts with '.' and is a strict beginning of a known
//     checkpoint extension (".safetensor" for ".safetensors", ".distc" for ".distcp").
std::string pattern_problem(std::string_view pattern, IsDirectory is_directory);

// One line per suspect pattern of `spec` (colon-separated, as APPENDGUARD_PATHS): "appendguard:
// APPENDGUARD_PATHS pattern '...' ...".
std::vector<std::string> pattern_notices(std::string_view spec, IsDirectory is_directory);

}  // namespace appendguard
