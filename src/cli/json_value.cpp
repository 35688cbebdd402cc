#include "cli/json_value.h"

namespace appendguard {
namespace {

// Nesting deeper than this is not something the library writes.
constexpr int kMaxDepth = 16;

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool value(JsonValue& out, int depth) {
    skip_space();
    if (at_ >= text_.size() || depth > kMaxDepth) return false;
    size_t start = at_;
    bool ok = false;
    char c = text_[at_];
    if (c == '{') {
      ok = object(out, depth);
    } else if (c == '[') {
      ok = array(out, depth);
    } else if (c == '"') {
      out.kind = JsonValue::Kind::kString;
      ok = string(out.text);
    } else if (literal("true") || literal("false")) {
      out.kind = JsonValue::Kind::kBool;
      out.text = std::string(text_.substr(start, at_ - start));
      ok = true;
    } else if (literal("null")) {
      ok = true;
    } else {
      out.kind = JsonValue::Kind::kNumber;
      ok = number(out.text);
    }
    if (ok) out.raw = std::string(text_.substr(start, at_ - start));
    return ok;
  }

  bool at_end() {
    skip_space();
    return at_ == text_.size();
  }

 private:
  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r')) {
      ++at_;
    }
  }

  bool consume(char c) {
    skip_space();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }

  bool literal(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  bool object(JsonValue& out, int depth) {
    out.kind = JsonValue::Kind::kObject;
    ++at_;
    if (consume('}')) return true;
    do {
      skip_space();
      std::string name;
      if (at_ >= text_.size() || text_[at_] != '"' || !string(name) || !consume(':')) return false;
      JsonValue member;
      if (!value(member, depth + 1)) return false;
      out.names.push_back(std::move(name));
      out.values.push_back(std::move(member));
    } while (consume(','));
    return consume('}');
  }

  bool array(JsonValue& out, int depth) {
    out.kind = JsonValue::Kind::kArray;
    ++at_;
    if (consume(']')) return true;
    do {
      JsonValue item;
      if (!value(item, depth + 1)) return false;
      out.items.push_back(std::move(item));
    } while (consume(','));
    return consume(']');
  }

  static void add_code_point(std::string& out, unsigned code) {
    if (code < 0x100) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  bool string(std::string& out) {
    ++at_;  // the opening quote
    while (at_ < text_.size()) {
      char c = text_[at_++];
      if (c == '"') return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= text_.size()) return false;
      char e = text_[at_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          if (at_ + 4 > text_.size()) return false;
          unsigned code = 0;
          for (int i = 0; i < 4; ++i) {
            int digit = hex_digit_value(text_[at_++]);
            if (digit < 0) return false;
            code = code * 16 + static_cast<unsigned>(digit);
          }
          add_code_point(out, code);
          break;
        }
        default:
          out += e;  // \" \\ \/
      }
    }
    return false;
  }

  bool number(std::string& out) {
    size_t start = at_;
    while (at_ < text_.size()) {
      char c = text_[at_];
      if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
        ++at_;
      } else {
        break;
      }
    }
    out = std::string(text_.substr(start, at_ - start));
    return at_ > start;
  }

  std::string_view text_;
  size_t at_ = 0;
};

}  // namespace

int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

const JsonValue* JsonValue::find(std::string_view name) const {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return &values[i];
  }
  return nullptr;
}

std::string JsonValue::text_of(std::string_view name) const {
  const JsonValue* member = find(name);
  if (!member || (member->kind != Kind::kString && member->kind != Kind::kNumber)) return {};
  return member->text;
}

std::optional<JsonValue> parse_json(std::string_view text) {
  Reader reader(text);
  JsonValue value;
  if (!reader.value(value, 0) || !reader.at_end()) return std::nullopt;
  return value;
}

}  // namespace appendguard
