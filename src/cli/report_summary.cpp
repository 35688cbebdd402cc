#include "cli/report_summary.h"

namespace appendguard {
namespace {

constexpr std::string_view kPrefix = "appendguard: violation: ";
constexpr std::string_view kWhy = "  why: ";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads the escaped path at the start of `text` (src/report/escape.h): quoted up to the closing quote, or
// up to the first space. Returns the characters consumed, or 0 if malformed.
size_t read_escaped_path(std::string_view text, std::string& path) {
  path.clear();
  bool quoted = !text.empty() && text[0] == '"';
  size_t i = quoted ? 1 : 0;
  while (i < text.size()) {
    char c = text[i];
    if (quoted && c == '"') return i + 1;
    if (!quoted && c == ' ') return i;
    if (c != '\\') {
      path += c;
      ++i;
      continue;
    }
    if (i + 1 >= text.size()) return 0;
    char e = text[i + 1];
    if (e == 'x') {
      if (i + 3 >= text.size() || hex_value(text[i + 2]) < 0 || hex_value(text[i + 3]) < 0) return 0;
      path += static_cast<char>(hex_value(text[i + 2]) * 16 + hex_value(text[i + 3]));
      i += 4;
      continue;
    }
    path += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
    i += 2;
  }
  return quoted ? 0 : i;
}

// The rank of "; pid P rank R host H" at the end of a first line, or "".
std::string rank_of(std::string_view line) {
  size_t at = line.rfind("; pid ");
  if (at == std::string_view::npos) return {};
  size_t rank = line.find(" rank ", at);
  if (rank == std::string_view::npos) return {};
  rank += 6;
  size_t end = line.find(' ', rank);
  return std::string(line.substr(rank, end == std::string_view::npos ? std::string_view::npos : end - rank));
}

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
      std::string path;
      size_t used = space == std::string_view::npos ? 0 : read_escaped_path(rest.substr(space + 1), path);
      if (used == 0 || rest.substr(space + 1 + used, 4) != " fd=") {
        last = nullptr;
        continue;
      }
      std::string operation(rest.substr(0, space));
      last = nullptr;
      for (ViolationGroup& g : groups) {
        if (g.operation == operation && g.path == path) last = &g;
      }
      last_is_new = last == nullptr;
      if (!last) {
        groups.push_back(ViolationGroup{operation,
                                        path,
                                        std::string(rest.substr(space + 1, used)),
                                        0,
                                        std::string(line),
                                        "",
                                        line.find("; fixed by enforce mode") != std::string_view::npos,
                                        {}});
        last = &groups.back();
      }
      ++last->count;
      if (std::string rank = rank_of(line); !rank.empty()) {
        bool seen = false;
        for (const std::string& r : last->ranks) seen = seen || r == rank;
        if (!seen) last->ranks.push_back(rank);
      }
    } else if (last && last_is_new && line.substr(0, kWhy.size()) == kWhy) {
      last->why = std::string(line.substr(kWhy.size()));
      last_is_new = false;
    }
  }
}

}  // namespace appendguard
