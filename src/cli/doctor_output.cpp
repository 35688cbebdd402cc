#include "cli/doctor_output.h"

#include <cstdio>

namespace appendguard {

namespace {

std::string key_of(std::string_view label) {
  std::string key(label);
  for (char& c : key) {
    if (c == ' ') c = '_';
  }
  return key;
}

std::string_view without_indent(std::string_view line) {
  size_t start = line.find_first_not_of(' ');
  return start == std::string_view::npos ? std::string_view() : line.substr(start);
}

}  // namespace

std::string DoctorOutput::quoted(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += "\\u00";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

DoctorOutput::Member& DoctorOutput::member(std::string_view key) {
  for (Member& m : members_) {
    if (m.key == key) return m;
  }
  members_.push_back(Member{std::string(key), {}, false});
  return members_.back();
}

void DoctorOutput::print(std::string_view line) const {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
}

void DoctorOutput::field(std::string_view label, std::string_view value) {
  last_label_ = key_of(label);
  if (!json_) {
    std::string line = std::string(label) + ":";
    if (line.size() < 16) line.resize(16, ' ');
    print(line.append(value));
    return;
  }
  Member& m = member(last_label_);
  m.values.push_back(quoted(value));
  if (m.values.size() > 1) m.array = true;
}

void DoctorOutput::detail(std::string_view line) {
  if (!json_) return print(line);
  Member& m = member(last_label_ + "_details");
  m.array = true;
  m.values.push_back(quoted(without_indent(line)));
}

void DoctorOutput::text(std::string_view line) {
  if (!json_) print(line);
}

void DoctorOutput::row(std::string_view table, std::string_view line,
                       std::initializer_list<std::pair<std::string_view, std::string_view>> cells) {
  if (!json_) return print(line);
  std::string object = "{";
  for (const auto& [name, value] : cells) {
    if (object.size() > 1) object += ',';
    object += quoted(name) + ":" + quoted(value);
  }
  Member& m = member(table);
  m.array = true;
  m.values.push_back(object + "}");
}

void DoctorOutput::json_only(std::string_view key, std::string_view value) {
  if (!json_) return;
  member(key).values.push_back(quoted(value));
}

std::string DoctorOutput::finish(int problems, int status) const {
  if (!json_) return {};
  std::string out = "{";
  for (const Member& m : members_) {
    out += quoted(m.key) + ":";
    if (m.array) out += '[';
    for (size_t i = 0; i < m.values.size(); ++i) out += (i ? "," : "") + m.values[i];
    if (m.array) out += ']';
    out += ',';
  }
  out += "\"problems\":" + std::to_string(problems) + ",\"status\":" + std::to_string(status) + "}";
  return out;
}

}  // namespace appendguard
