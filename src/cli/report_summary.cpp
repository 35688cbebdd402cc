#include "cli/report_summary.h"

namespace appendguard {
namespace {

constexpr std::string_view kPrefix = "appendguard: violation: ";
constexpr std::string_view kWhy = "  why: ";

}  // namespace

void collect_violations(std::string_view log, std::vector<ViolationGroup>& groups) {
  ViolationGroup* last = nullptr;
  bool last_is_new = false;
  size_t at = 0;
  while (at < log.size()) {
    size_t end = log.find('\n', at);
    std::string_view line = log.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    at = end == std::string_view::npos ? log.size() : end + 1;
    if (line.substr(0, kPrefix.size()) == kPrefix) {
      std::string_view rest = line.substr(kPrefix.size());
      size_t space = rest.find(' ');
      size_t fd = rest.find(" fd=");
      if (space == std::string_view::npos || fd == std::string_view::npos || fd < space) {
        last = nullptr;
        continue;
      }
      std::string operation(rest.substr(0, space));
      std::string path(rest.substr(space + 1, fd - space - 1));
      last = nullptr;
      for (ViolationGroup& g : groups) {
        if (g.operation == operation && g.path == path) last = &g;
      }
      last_is_new = last == nullptr;
      if (!last) {
        groups.push_back(ViolationGroup{operation, path, 0, std::string(line), ""});
        last = &groups.back();
      }
      ++last->count;
    } else if (last && last_is_new && line.substr(0, kWhy.size()) == kWhy) {
      last->why = std::string(line.substr(kWhy.size()));
      last_is_new = false;
    }
  }
}

}  // namespace appendguard
