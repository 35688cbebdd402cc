#include "cli/report_summary.h"

#include <optional>
#include <unordered_map>

#include "cli/json_value.h"

namespace appendguard {
namespace {

constexpr std::string_view kPrefix = "appendguard: violation: ";
constexpr std::string_view kWhy = "  why: ";

}  // namespace

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
      if (i + 3 >= text.size() || hex_digit_value(text[i + 2]) < 0 || hex_digit_value(text[i + 3]) < 0)
        return 0;
      path += static_cast<char>(hex_digit_value(text[i + 2]) * 16 + hex_digit_value(text[i + 3]));
      i += 4;
      continue;
    }
    path += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
    i += 2;
  }
  return quoted ? 0 : i;
}

std::string bounded_field(std::string_view text) {
  if (text.size() <= kMaxFieldBytes) return std::string(text);
  return std::string(text.substr(0, kMaxFieldBytes)) + "...[+" +
         std::to_string(text.size() - kMaxFieldBytes) + "]";
}

bool starts_as_json_record(std::string_view line) {
  if (!line.starts_with('{')) return false;
  const size_t key = line.find_first_not_of(" \t", 1);
  return key != std::string_view::npos && line.substr(key).starts_with("\"type\"");
}

namespace {

// The rank of "; pid P rank R host H" at the end of a first line (escaped as a path is: a rank with a
// space is quoted, so it reads one way only), or "".
std::string rank_of(std::string_view line) {
  size_t at = line.rfind("; pid ");
  if (at == std::string_view::npos) return {};
  size_t rank = line.find(" rank ", at);
  if (rank == std::string_view::npos) return {};
  std::string value;
  if (read_escaped_path(line.substr(rank + 6), value) == 0) return {};
  return value;
}

// The key a report is grouped by (see add_report).
std::string group_key(const ViolationReport& facts) {
  std::string key = facts.operation;
  key += '\0';
  key += facts.seek_site;
  key += facts.site.empty() ? "\0p" : "\0s";
  key += facts.site.empty() ? facts.path : facts.site;
  return key;
}

}  // namespace

namespace {

constexpr std::string_view kSeekHeading = "  the position left the end at: ";

// A native frame line's part after the address ("#3  0x00000040112a name+0x1a (module+0x112a)" ->
// "name+0x1a (module+0x112a)"), or "" for a frame of libc or the library, or not a frame.
std::string_view program_frame(std::string_view frame) {
  if (!frame.starts_with('#')) return {};
  size_t address = frame.find(" 0x");
  size_t name = address == std::string_view::npos ? address : frame.find(' ', address + 1);
  if (name == std::string_view::npos) return {};
  std::string_view rest = frame.substr(name + 1);
  size_t open = rest.rfind('(');
  std::string_view module = open == std::string_view::npos ? rest : rest.substr(open + 1);
  if (module.rfind("libappendguard", 0) == 0 || module.rfind("libc.so", 0) == 0 ||
      module.rfind("libc-", 0) == 0 || module.rfind("libpthread", 0) == 0) {
    return {};
  }
  return rest;
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
    if (section == Section::kNative && native.empty()) native = std::string(program_frame(frame));
  }
  return native;
}

SeekSiteText seek_site_of(std::string_view block) {
  SeekSiteText seek;
  size_t heading = block.find(kSeekHeading);
  while (heading != std::string_view::npos && heading != 0 && block[heading - 1] != '\n')
    heading = block.find(kSeekHeading, heading + 1);
  if (heading == std::string_view::npos) return seek;
  size_t at = block.find('\n', heading);
  seek.call = std::string(block.substr(
      heading + kSeekHeading.size(),
      at == std::string_view::npos ? std::string_view::npos : at - heading - kSeekHeading.size()));
  // Its frames: the Python ones first (innermost first), then the native ones.
  std::string native;
  while (at != std::string_view::npos && at + 1 < block.size()) {
    size_t end = block.find('\n', at + 1);
    std::string_view line =
        block.substr(at + 1, end == std::string_view::npos ? std::string_view::npos : end - at - 1);
    at = end;
    if (line.substr(0, 4) != "    ") break;
    std::string_view frame = line.substr(4);
    if (frame.rfind("File \"", 0) == 0) {
      seek.site = std::string(frame);
      return seek;
    }
    if (native.empty()) native = std::string(program_frame(frame));
  }
  seek.site = std::move(native);
  return seek;
}

namespace {

using GroupIndex = std::unordered_map<std::string, size_t>;

// Every field kept is bounded (bounded_field): memory per record does not grow with a line's length.
void bound_fields(ViolationReport& facts) {
  for (std::string* field : {&facts.operation, &facts.path, &facts.shown_path, &facts.first_line, &facts.site,
                             &facts.seek_call, &facts.seek_site, &facts.why, &facts.rank}) {
    if (field->size() > kMaxFieldBytes) *field = bounded_field(*field);
  }
}

void add_report(ViolationReport facts, std::vector<ViolationGroup>& groups, GroupIndex& index,
                std::string_view log_name, std::vector<ViolationReport>* reports) {
  bound_fields(facts);
  if (reports) reports->push_back(facts);
  ViolationGroup* group = nullptr;
  auto [found, added] = index.emplace(group_key(facts), groups.size());
  if (!added) group = &groups[found->second];
  if (!group) {
    ViolationGroup g;
    g.operation = facts.operation;
    g.path = facts.path;
    g.shown_path = std::move(facts.shown_path);
    g.first_line = std::move(facts.first_line);
    g.fixed_by_enforce = facts.fixed_by_enforce;
    g.site = std::move(facts.site);
    g.seek_call = facts.seek_call;
    g.seek_site = facts.seek_site;
    g.first_log = std::string(log_name);
    g.why = std::move(facts.why);
    groups.push_back(std::move(g));
    group = &groups.back();
  }
  ++group->count;
  if (group->paths_seen.insert(facts.path).second) ++group->files;
  if (!facts.rank.empty() && group->ranks_seen.insert(facts.rank).second) group->ranks.push_back(facts.rank);
}

// The numbers of a text report's first line: " fd=3 bytes=512 offset=0 end_of_file=100: refused (...); pid
// 7 rank 0 host h" (`fields` starts at " fd=").
void fill_numbers(std::string_view fields, std::string_view line, ViolationReport& facts) {
  size_t colon = fields.find(": ");
  std::string_view numbers = fields.substr(0, colon);
  auto value_of = [&](std::string_view name) {
    size_t at = numbers.find(name);
    if (at == std::string_view::npos) return std::string();
    at += name.size();
    return std::string(numbers.substr(at, numbers.find(' ', at) - at));
  };
  facts.bytes = value_of(" bytes=");
  facts.offset = value_of(" offset=");
  facts.end_of_file = value_of(" end_of_file=");
  if (colon != std::string_view::npos) {
    std::string_view outcome = fields.substr(colon + 2);
    facts.outcome = outcome.starts_with("refused")       ? "refused"
                    : outcome.starts_with("aborting")    ? "aborted"
                    : outcome.starts_with("let through") ? "let_through"
                    : outcome.starts_with("allowed")     ? "audit"
                                                         : "kernel_refuses";
  }
  size_t pid = line.rfind("; pid ");
  if (pid != std::string_view::npos) {
    pid += 6;
    facts.pid = std::string(line.substr(pid, line.find(' ', pid) - pid));
  }
}

// The lines of a JSON array of strings, indented as in the text format, under `heading` (none: "").
void add_stack_lines(const JsonValue* frames, std::string_view heading, std::string& block) {
  if (!frames || frames->kind != JsonValue::Kind::kArray) return;
  if (!heading.empty()) {
    block += heading;
    block += '\n';
  }
  for (const JsonValue& frame : frames->items) block += "    " + frame.text + "\n";
}

// A `{"type":"violation",...}` line (APPENDGUARD_FORMAT=json, docs/reference.md), or nullopt.
std::optional<ViolationReport> facts_of_json(const std::optional<JsonValue>& report) {
  if (!report || report->kind != JsonValue::Kind::kObject || report->text_of("type") != "violation") {
    return std::nullopt;
  }
  const JsonValue* path = report->find("path");
  if (!path || path->kind != JsonValue::Kind::kString) return std::nullopt;
  ViolationReport facts;
  facts.operation = report->text_of("operation");
  facts.path = path->text;
  facts.shown_path = path->raw;  // JSON-escaped, between quotes: safe to print
  facts.fixed_by_enforce = report->text_of("finding") == "fixed by enforce mode";
  facts.why = report->text_of("why");
  facts.rank = report->text_of("rank");
  facts.pid = report->text_of("pid");
  facts.offset = report->text_of("offset");
  facts.bytes = report->text_of("bytes");
  facts.end_of_file = report->text_of("end_of_file");
  facts.outcome = report->text_of("outcome");
  // The site is chosen as in a text report, from the same frame lines.
  std::string block;
  add_stack_lines(report->find("python_stack"), "  python stack (most recent call first):", block);
  add_stack_lines(report->find("native_stack"), "  native stack:", block);
  facts.site = call_site_of(block);
  if (const JsonValue* seek = report->find("left_end_at"); seek && seek->kind == JsonValue::Kind::kObject) {
    // The text format's heading and lines, so that the seek site is chosen as in a text report.
    std::string seek_block = std::string(kSeekHeading) + seek->text_of("operation") + "(offset " +
                             seek->text_of("offset") + ", " + seek->text_of("whence") + ") -> " +
                             seek->text_of("position") + ", end of file " + seek->text_of("end_of_file") +
                             ", tid " + seek->text_of("tid") + "\n";
    add_stack_lines(seek->find("python_stack"), "", seek_block);
    add_stack_lines(seek->find("native_stack"), "", seek_block);
    SeekSiteText seek_site = seek_site_of(seek_block);
    facts.seek_call = std::move(seek_site.call);
    facts.seek_site = std::move(seek_site.site);
  }
  std::string errno_name = report->text_of("errno");
  facts.first_line = std::string(kPrefix) + facts.operation + " " + facts.shown_path +
                     " fd=" + report->text_of("fd") + ": " + report->text_of("outcome") +
                     (errno_name.empty() ? "" : " (" + errno_name + ")") + "; pid " + report->text_of("pid") +
                     " rank " + facts.rank + " host " + report->text_of("host");
  return facts;
}

}  // namespace

std::optional<BadRecord> collect_violations(std::string_view log, std::vector<ViolationGroup>& groups,
                                            std::string_view log_name,
                                            std::vector<ViolationReport>* reports) {
  GroupIndex index;
  for (size_t i = 0; i < groups.size(); ++i) {
    ViolationReport key;
    key.operation = groups[i].operation;
    key.seek_site = groups[i].seek_site;
    key.site = groups[i].site;
    key.path = groups[i].path;
    index.emplace(group_key(key), i);
  }
  std::optional<BadRecord> bad;
  auto refuse = [&](size_t line_number, std::string what) {
    if (!bad) bad = BadRecord{line_number, std::move(what)};
  };
  size_t at = 0;
  size_t line_number = 0;
  while (at < log.size()) {
    size_t end = log.find('\n', at);
    std::string_view line = log.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    at = end == std::string_view::npos ? log.size() : end + 1;
    ++line_number;
    size_t line_start = static_cast<size_t>(line.data() - log.data());
    if (line.starts_with('{')) {
      if (starts_as_json_record(line) && line.size() > kMaxRecordLine) {
        refuse(line_number, "a JSON record longer than any the library writes (" +
                                std::to_string(line.size()) + " bytes)");
        continue;
      }
      const std::optional<JsonValue> record = parse_json(line);
      if (std::optional<ViolationReport> facts = facts_of_json(record)) {
        facts->at = line_start;
        add_report(std::move(*facts), groups, index, log_name, reports);
      } else if (starts_as_json_record(line) && (!record || record->kind != JsonValue::Kind::kObject)) {
        refuse(line_number, "a JSON record that does not parse (cut short or altered)");
      } else if (record && record->kind == JsonValue::Kind::kObject &&
                 record->text_of("type") == "violation") {
        refuse(line_number, "a JSON violation without its path");
      }
      continue;
    }
    if (line.substr(0, kPrefix.size()) != kPrefix) continue;
    std::string_view rest = line.substr(kPrefix.size());
    size_t space = rest.find(' ');
    std::string path;
    size_t used = space == std::string_view::npos ? 0 : read_escaped_path(rest.substr(space + 1), path);
    if (used == 0 || rest.substr(space + 1 + used, 4) != " fd=") {
      refuse(line_number, "a violation report's first line that does not read as one (no path and fd=)");
      continue;
    }
    // The block: the indented lines that follow.
    size_t block_start = at;
    while (at < log.size() && log.substr(at, 2) == "  ") {
      size_t next = log.find('\n', at);
      at = next == std::string_view::npos ? log.size() : next + 1;
      ++line_number;
    }
    std::string_view block = log.substr(block_start, at - block_start);
    ViolationReport facts;
    facts.operation = std::string(rest.substr(0, space));
    facts.path = std::move(path);
    facts.shown_path = std::string(rest.substr(space + 1, used));
    facts.first_line = std::string(line);
    facts.fixed_by_enforce = line.find("; fixed by enforce mode") != std::string_view::npos;
    facts.site = call_site_of(block);
    SeekSiteText seek = seek_site_of(block);
    facts.seek_call = std::move(seek.call);
    facts.seek_site = std::move(seek.site);
    size_t why = block.find(kWhy);
    if (why != std::string_view::npos && (why == 0 || block[why - 1] == '\n')) {
      size_t why_end = block.find('\n', why);
      facts.why = std::string(block.substr(why + kWhy.size(), why_end == std::string_view::npos
                                                                  ? std::string_view::npos
                                                                  : why_end - why - kWhy.size()));
    }
    facts.rank = rank_of(line);
    facts.at = line_start;
    if (reports) fill_numbers(rest.substr(space + 1 + used), line, facts);
    add_report(std::move(facts), groups, index, log_name, reports);
  }
  return bad;
}

}  // namespace appendguard
