#include "core/path.h"

namespace appendguard {
namespace {

// Appends the components of `part` to out[0..len), resolving "." and "..".
bool append_components(std::string_view part, char* out, size_t capacity, size_t& len) {
  size_t i = 0;
  while (i < part.size()) {
    while (i < part.size() && part[i] == '/') ++i;
    size_t start = i;
    while (i < part.size() && part[i] != '/') ++i;
    std::string_view component = part.substr(start, i - start);
    if (component.empty() || component == ".") continue;
    if (component == "..") {
      while (len > 1 && out[len - 1] != '/') --len;
      if (len > 1) --len;  // drop the separator, keep the root '/'
      continue;
    }
    size_t needed = (len > 1 ? 1 : 0) + component.size();
    if (len + needed + 1 > capacity) return false;
    if (len > 1) out[len++] = '/';
    for (char c : component) out[len++] = c;
  }
  return true;
}

}  // namespace

size_t normalize_path(std::string_view base_dir, std::string_view path, char* out, size_t capacity) {
  if (capacity < 2) return 0;
  bool absolute = !path.empty() && path[0] == '/';
  if (!absolute && (base_dir.empty() || base_dir[0] != '/')) return 0;
  size_t len = 0;
  out[len++] = '/';
  if (!absolute && !append_components(base_dir, out, capacity, len)) return 0;
  if (!append_components(path, out, capacity, len)) return 0;
  out[len] = '\0';
  return len;
}

}  // namespace appendguard
