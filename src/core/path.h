// Lexical path normalization into a caller-provided buffer (no allocation, usable inside hooks).
#pragma once

#include <cstddef>
#include <string_view>

namespace appendguard {

// Joins `path` onto `base_dir` when `path` is relative, then removes "//", "." and ".." lexically
// (symlinks are not resolved). Writes a NUL-terminated absolute path to `out`. Returns its length, or 0
// when it does not fit in `capacity` or when a relative path comes without an absolute base.
size_t normalize_path(std::string_view base_dir, std::string_view path, char* out, size_t capacity);

}  // namespace appendguard
