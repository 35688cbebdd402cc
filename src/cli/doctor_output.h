// `appendguard doctor`'s output: text lines printed as they come, or with --json one JSON object of the
// same facts printed at the end: a field per label (a label given twice: an array of its values), the
// lines under a field in "<label>_details", each table an array of objects. Pure but for the printing.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace appendguard {

class DoctorOutput {
 public:
  explicit DoctorOutput(bool json) : json_(json) {}
  // Text: "label:" padded to 16 columns, then the value. JSON: "label": "value" (spaces become '_').
  void field(std::string_view label, std::string_view value);
  // A line under the last field, printed as given (with its indentation); in JSON without it.
  void detail(std::string_view line);
  // A line of text output only (a table's heading).
  void text(std::string_view line);
  // A table row: `line` in text; in JSON an object of `cells` appended to the array `table`.
  void row(std::string_view table, std::string_view line,
           std::initializer_list<std::pair<std::string_view, std::string_view>> cells);
  // A JSON member only (text output says it otherwise).
  void json_only(std::string_view key, std::string_view value);
  // The JSON object, with "problems" and "status" last ("" in text mode: everything is printed already).
  std::string finish(int problems, int status) const;

  // `text` as a JSON string, quotes included.
  static std::string quoted(std::string_view text);

 private:
  struct Member {
    std::string key;
    std::vector<std::string> values;  // JSON values
    bool array = false;
  };
  Member& member(std::string_view key);
  void print(std::string_view line) const;

  bool json_;
  std::vector<Member> members_;
  std::string last_label_;
};

}  // namespace appendguard
