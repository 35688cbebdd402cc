// Fields that come from outside (file, function, symbol and module names, ranks, whole log lines) can
// neither forge a line of a report nor reach a terminal raw, and a record cut short is never read as
// nothing.
#include <catch2/catch.hpp>
#include <string>

#include "cli/printable.h"
#include "cli/report_summary.h"
#include "report/escape.h"

using namespace appendguard;

namespace {

std::string escaped_path(std::string_view path) {
  static char storage[kMaxEscapedText + 64];
  TextBuffer out(storage, sizeof storage);
  add_escaped_path(out, path);
  return std::string(out.view());
}

std::string one_line(std::string_view text) {
  static char storage[kMaxEscapedText + 64];
  TextBuffer out(storage, sizeof storage);
  add_one_line(out, text);
  return std::string(out.view());
}

std::string json(std::string_view text) {
  static char storage[kMaxEscapedText + 64];
  TextBuffer out(storage, sizeof storage);
  add_json_string(out, text);
  return std::string(out.view());
}

}  // namespace

TEST_CASE("direction controls are escaped in paths, one-line fields and JSON, other UTF-8 is kept") {
  CHECK(escaped_path("/a/\u202egnp.exe") == "/a/\\xe2\\x80\\xaegnp.exe");
  CHECK(escaped_path("/a/\u2066x\u2069") == "/a/\\xe2\\x81\\xa6x\\xe2\\x81\\xa9");
  CHECK(escaped_path("/caf\u00e9/\u20ac") == "/caf\u00e9/\u20ac");
  CHECK(one_line("save\u200f\nappendguard: violation:") == "save\\xe2\\x80\\x8f\\nappendguard: violation:");
  CHECK(json("x\u202ey") == "\"x\\u202ey\"");
  CHECK(printable("\x1b]0;t\x07\u202e\u20ac") == "\\x1b]0;t\\x07\\xe2\\x80\\xae\u20ac");
}

TEST_CASE("a record that starts as one but does not read is reported with its line") {
  std::vector<ViolationGroup> groups;
  const std::string cut =
      "{\"type\":\"summary\",\"pid\":1}\n"
      "{\"type\":\"violation\",\"operation\":\"write\",\"path\":\"/a\",\"fd\":3\n";
  std::optional<BadRecord> bad = collect_violations(cut, groups);
  REQUIRE(bad);
  CHECK(bad->line == 2);
  CHECK(groups.empty());
  bad = collect_violations("ok\n  indented\nappendguard: violation: write\n", groups);
  REQUIRE(bad);
  CHECK(bad->line == 3);
  CHECK_FALSE(
      collect_violations("{not ours}\nplain output\n{\"type\":\"notice\",\"message\":\"m\"}\n", groups));
}

TEST_CASE("a quoted rank reads one way, and long fields are cut saying so") {
  std::vector<ViolationGroup> groups;
  const std::string why(100000, 'w');
  const std::string log =
      "appendguard: violation: write /a fd=3 bytes=1 offset=0 end_of_file=2: refused; pid 7 rank "
      "\"0 host 9\" host h\n  why: " +
      why + "\n";
  REQUIRE_FALSE(collect_violations(log, groups));
  REQUIRE(groups.size() == 1);
  CHECK(groups[0].ranks == std::vector<std::string>{"0 host 9"});
  CHECK(groups[0].why.size() < kMaxFieldBytes + 32);
  CHECK(groups[0].why.ends_with("...[+" + std::to_string(why.size() - kMaxFieldBytes) + "]"));
}
