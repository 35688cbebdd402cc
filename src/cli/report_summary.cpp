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

std::string call_site_of(std::string_view block) {
  enum class Section { kOther, kNative, kPython } section = Section::kOther;
  std::string native;
  size_t at = 0;
  while (at < block.size()) {
    size_t end = block.find('\n', at);
    std::string_view line =
        block.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    at = end == std::string_view::npos ? block.size() : end + 1;
    if (line.substr(0, 4) != "    ") {
      section = line == "  native stack:"              ? Section::kNative
                : line.rfind("  python stack", 0) == 0 ? Section::kPython
                                                       : Section::kOther;
      continue;
    }
    std::string_view frame = line.substr(4);
    if (section == Section::kPython && frame.rfind("File \"", 0) == 0) return std::string(frame);
    if (section == Section::kNative && native.empty() && frame.starts_with('#')) {
      // "#3  0x00000040112a name+0x1a (module+0x112a)": the part after the address.
      size_t address = frame.find(" 0x");
      size_t name = address == std::string_view::npos ? address : frame.find(' ', address + 1);
      if (name == std::string_view::npos) continue;
      std::string_view rest = frame.substr(name + 1);
      size_t open = rest.rfind('(');
      std::string_view module = open == std::string_view::npos ? rest : rest.substr(open + 1);
      if (module.rfind("libappendguard", 0) == 0 || module.rfind("libc.so", 0) == 0 ||
          module.rfind("libc-", 0) == 0 || module.rfind("libpthread", 0) == 0) {
        continue;
      }
      native = std::string(rest);
    }
  }
  return native;
}

void collect_violations(std::string_view log, std::vector<ViolationGroup>& groups,
                        std::string_view log_name) {
  size_t at = 0;
  while (at < log.size()) {
    size_t end = log.find('\n', at);
    std::string_view line = log.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    at = end == std::string_view::npos ? log.size() : end + 1;
    if (line.substr(0, kPrefix.size()) != kPrefix) continue;
    std::string_view rest = line.substr(kPrefix.size());
    size_t space = rest.find(' ');
    std::string path;
    size_t used = space == std::string_view::npos ? 0 : read_escaped_path(rest.substr(space + 1), path);
    if (used == 0 || rest.substr(space + 1 + used, 4) != " fd=") continue;
    // The block: the indented lines that follow.
    size_t block_start = at;
    while (at < log.size() && log.substr(at, 2) == "  ") {
      size_t next = log.find('\n', at);
      at = next == std::string_view::npos ? log.size() : next + 1;
    }
    std::string_view block = log.substr(block_start, at - block_start);
    std::string operation(rest.substr(0, space));
    std::string site = call_site_of(block);
    ViolationGroup* group = nullptr;
    for (ViolationGroup& g : groups) {
      if (g.operation == operation && (site.empty() ? g.site.empty() && g.path == path : g.site == site)) {
        group = &g;
      }
    }
    if (!group) {
      ViolationGroup g;
      g.operation = operation;
      g.path = path;
      g.shown_path = std::string(rest.substr(space + 1, used));
      g.first_line = std::string(line);
      g.fixed_by_enforce = line.find("; fixed by enforce mode") != std::string_view::npos;
      g.site = site;
      g.first_log = std::string(log_name);
      size_t why = block.find(kWhy);
      if (why != std::string_view::npos && (why == 0 || block[why - 1] == '\n')) {
        size_t why_end = block.find('\n', why);
        g.why = std::string(block.substr(why + kWhy.size(), why_end == std::string_view::npos
                                                                ? std::string_view::npos
                                                                : why_end - why - kWhy.size()));
      }
      groups.push_back(std::move(g));
      group = &groups.back();
    }
    ++group->count;
    bool seen_path = false;
    for (const std::string& p : group->paths_seen) seen_path = seen_path || p == path;
    if (!seen_path) {
      group->paths_seen.push_back(path);
      ++group->files;
    }
    if (std::string rank = rank_of(line); !rank.empty()) {
      bool seen = false;
      for (const std::string& r : group->ranks) seen = seen || r == rank;
      if (!seen) group->ranks.push_back(rank);
    }
  }
}

}  // namespace appendguard
