#include "cli/report_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "cli/input_file.h"
#include "cli/printable.h"
#include "cli/replace_file.h"
#include "cli/report_html.h"
#include "cli/report_summary.h"
#include "cli/timeline.h"

namespace appendguard {

const char* const kReportUsage =
    "usage: appendguard report [--json] [--html OUT.html] LOG... (or - for standard input)\n"
    "Reads report logs (APPENDGUARD_LOG files, captured stderr) and prints the violations grouped by call\n"
    "site across ranks (the innermost Python frame, else the first native frame outside libc and the\n"
    "library; by operation and file for reports without a stack), with a count, the ranks, the first\n"
    "report and its log; for a write at the position, the seek that moved it off the end (seek at:).\n"
    "Audit findings that enforce mode fixes are listed, not counted.\n"
    "  --json          one JSON object: violations, fixed_by_enforce, logs, groups[]\n"
    "  --html OUT.html also writes one self-contained page: a summary table and, per guarded file, a\n"
    "                  timeline of its writes, seeks, opens, truncations and refusals (from the trace lines\n"
    "                  of APPENDGUARD_TRACE=1 logs; violation reports alone without them)\n"
    "Exit status: 0 no violation, 1 violations found, 2 bad arguments, a log that could not be read, or a\n"
    "log line that starts as a record but does not read as one (cut short or altered: FILE:LINE is named).\n";

namespace {

constexpr size_t kMaxStandardInput = size_t{1} << 30;
constexpr size_t kMaxLine = size_t{1} << 20;
constexpr const char* kAccepted = "accepted: --json, --html OUT.html, --help, LOG... (- for standard input)";

std::string json_string(std::string_view text) {
  std::string out = "\"";
  int skip = 0;
  for (const char& c : text) {
    if (skip > 0 && skip--) continue;
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", u);
      out += escaped;
    } else if (const unsigned code = direction_control(text, static_cast<size_t>(&c - text.data()))) {
      char escaped[16];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", code);
      out += escaped;
      skip = 2;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void print_json(const std::vector<ViolationGroup>& groups, size_t total, size_t fixed, size_t logs) {
  std::string out = "{\"violations\":" + std::to_string(total) +
                    ",\"fixed_by_enforce\":" + std::to_string(fixed) + ",\"logs\":" + std::to_string(logs) +
                    ",\"groups\":[";
  for (size_t i = 0; i < groups.size(); ++i) {
    const ViolationGroup& g = groups[i];
    std::string ranks;
    for (const std::string& r : g.ranks) ranks += (ranks.empty() ? "" : ",") + json_string(r);
    out += (i ? "," : "") + std::string("{\"operation\":") + json_string(g.operation) +
           ",\"site\":" + json_string(g.site) + ",\"seek_site\":" + json_string(g.seek_site) +
           ",\"seek_call\":" + json_string(g.seek_call) + ",\"count\":" + std::to_string(g.count) +
           ",\"fixed_by_enforce\":" + (g.fixed_by_enforce ? "true" : "false") + ",\"ranks\":[" + ranks +
           "],\"files\":" + std::to_string(g.files) + ",\"path\":" + json_string(g.path) +
           ",\"why\":" + json_string(g.why) + ",\"first\":" + json_string(g.first_line) +
           ",\"log\":" + json_string(g.first_log) + "}";
  }
  std::printf("%s]}\n", out.c_str());
}

void print_text(const std::vector<ViolationGroup>& groups, size_t total, size_t fixed, size_t counted_groups,
                size_t logs) {
  std::printf(
      "appendguard report: %zu violation%s in %zu group%s (call site, else operation and file) from "
      "%zu log%s",
      total, total == 1 ? "" : "s", counted_groups, counted_groups == 1 ? "" : "s", logs,
      logs == 1 ? "" : "s");
  if (fixed)
    std::printf("; %zu audit finding%s fixed by enforce mode, not counted", fixed, fixed == 1 ? "" : "s");
  std::printf("\n");
  // Every field printed is escaped (cli/printable.h): a log cannot drive the terminal or forge a line.
  auto shown = [](const std::string& text) { return printable(text); };
  for (const ViolationGroup& g : groups) {
    std::printf("\n%6zu x %s %s%s\n", g.count, shown(g.operation).c_str(), shown(g.shown_path).c_str(),
                g.fixed_by_enforce ? "  [fixed by enforce mode]" : "");
    if (!g.site.empty()) std::printf("         at: %s\n", shown(g.site).c_str());
    if (!g.seek_call.empty()) {  // where the position left the end: the cause of a write at the position
      std::printf("         seek at: %s%s%s\n", shown(g.seek_site).c_str(), g.seek_site.empty() ? "" : ": ",
                  shown(g.seek_call).c_str());
    }
    if (g.files > 1) std::printf("         files: %zu (the first shown)\n", g.files);
    if (!g.ranks.empty()) {
      // A rank with a comma or a space is quoted: the list reads one way only.
      std::string ranks;
      for (const std::string& r : g.ranks) {
        const bool quote = r.find_first_of(" ,\"") != std::string::npos;
        ranks += (ranks.empty() ? "" : ",") + (quote ? json_string(r) : shown(r));
      }
      std::printf("         ranks: %s\n", ranks.c_str());
    }
    std::printf("         first: %s\n", shown(g.first_line).c_str());
    if (!g.first_log.empty()) std::printf("         log: %s\n", shown(g.first_log).c_str());
    if (!g.why.empty()) std::printf("         why: %s\n", shown(g.why).c_str());
  }
}

// The page, written next to its final name and renamed over it (cli/replace_file.h): a reader never sees
// half a page, and no one else's file is written through a name planted in the directory.
bool write_page(const std::string& path, const std::string& page) {
  if (const int error = replace_file(path, page)) {
    std::fprintf(stderr, "appendguard report: cannot write '%s': %s\n", path.c_str(), std::strerror(error));
    return false;
  }
  return true;
}

}  // namespace

int report_command(const std::vector<std::string>& args) {
  // CLI11 reads the options; an argument it does not know is one line and status 2 (never a log name).
  CLI::App app{"appendguard report"};
  app.set_help_flag();
  app.allow_extras();
  bool json = false;
  bool help = false;
  std::string html;
  std::vector<std::string> logs;
  app.add_flag("--json", json);
  app.add_flag("-h,--help", help);
  app.add_option("--html", html);
  app.add_option("logs", logs);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "appendguard report: %s: %s\n", e.what(), kAccepted);
    return 2;
  }
  if (help) return std::fputs(kReportUsage, stdout), 0;
  for (const std::string& extra : app.remaining()) {
    if (extra == "--") continue;
    std::fprintf(stderr, "appendguard report: unknown option '%s': %s\n", extra.c_str(), kAccepted);
    return 2;
  }
  if (app.count("--html") && html.empty()) {
    std::fprintf(stderr, "appendguard report: --html needs a file name: %s\n", kAccepted);
    return 2;
  }
  if (logs.empty()) {
    std::fprintf(
        stderr,
        "appendguard report: no log given: usage: appendguard report [--json] [--html OUT.html] LOG... "
        "(- for stdin)\n");
    return 2;
  }
  Timelines timelines;
  for (size_t i = 0; i < logs.size(); ++i) {
    const std::string& name = logs[i];
    // Only regular files, or standard input up to a bound: never a directory, a FIFO nobody writes to or
    // /dev/zero.
    InputFile in =
        name == "-" ? read_bounded(STDIN_FILENO, kMaxStandardInput, kMaxLine) : read_regular_file(name);
    if (!in.ok) {
      std::fprintf(stderr, "appendguard report: cannot read '%s': %s\n",
                   name == "-" ? "standard input" : name.c_str(), in.error.c_str());
      return 2;
    }
    std::string_view log_name = name == "-" ? "(standard input)" : std::string_view(name);
    const std::optional<BadRecord> bad = html.empty()
                                             ? collect_violations(in.data, timelines.groups, log_name)
                                             : add_log(in.data, log_name, i, timelines);
    if (bad) {
      std::fprintf(stderr, "appendguard report: %s:%zu: %s: the log is not read as complete\n",
                   printable(log_name).c_str(), bad->line, bad->what.c_str());
      return 2;
    }
  }
  const std::vector<ViolationGroup>& groups = timelines.groups;
  size_t total = 0;
  size_t fixed = 0;
  size_t counted_groups = 0;
  for (const ViolationGroup& g : groups) {
    (g.fixed_by_enforce ? fixed : total) += g.count;
    if (!g.fixed_by_enforce) ++counted_groups;
  }
  if (!html.empty()) {
    finish(timelines);
    HtmlOptions options;
    options.logs = logs;
    if (!write_page(html, render_html(timelines, options))) return 2;
    size_t writes = 0;
    for (const FileTimeline& f : timelines.files) writes += f.writes;
    if (!json) {
      std::printf("appendguard report: wrote %s: %zu file%s, %zu write%s, %zu violation%s in %zu group%s\n",
                  html.c_str(), timelines.files.size(), timelines.files.size() == 1 ? "" : "s", writes,
                  writes == 1 ? "" : "s", total, total == 1 ? "" : "s", counted_groups,
                  counted_groups == 1 ? "" : "s");
      return total ? 1 : 0;
    }
  }
  if (json) {
    print_json(groups, total, fixed, logs.size());
  } else {
    print_text(groups, total, fixed, counted_groups, logs.size());
  }
  return total ? 1 : 0;
}

}  // namespace appendguard
