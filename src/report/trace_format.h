// Trace lines formatted by hand (no fmt, no printf): the hot path of APPENDGUARD_TRACE=1, where a line is
// written for every write or seek of a guarded file. The text is exactly format_trace's and
// format_trace_json's (report.h), which stay the reference (unit-tested against each other).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstring>
#include <string_view>

#include "report/report.h"

namespace appendguard {

// Appends into [data, data + capacity); an append that does not fit sets overflowed() and writes nothing
// more (the trace buffer then writes its block out and formats the line again).
class FastText {
 public:
  FastText(char* data, size_t capacity) : begin_(data), at_(data), end_(data + capacity) {}
  void text(std::string_view s) {
    if (!room(s.size())) return;
    std::memcpy(at_, s.data(), s.size());
    at_ += s.size();
  }
  void character(char c) {
    if (room(1)) *at_++ = c;
  }
  void unsigned_number(unsigned long long value);
  void signed_number(long long value);
  void hex(unsigned long long value);             // lower case, no prefix
  void microseconds(unsigned long long time_us);  // "S.UUUUUU": seconds, six digits of fraction
  // A path as add_escaped_path(out, path) writes it (escaped, quoted when it has a space or a quote).
  void path(std::string_view p);
  // A JSON string as add_json_string writes it; json_text: the same without the quotes.
  void json_string(std::string_view s);
  void json_text(std::string_view s);
  bool overflowed() const { return overflowed_; }
  size_t size() const { return static_cast<size_t>(at_ - begin_); }
  std::string_view view() const { return {begin_, size()}; }

 private:
  bool room(size_t n) {
    if (static_cast<size_t>(end_ - at_) >= n && !overflowed_) return true;
    overflowed_ = true;
    return false;
  }
  void escaped(std::string_view s, bool json, size_t already = 0);  // already: the field's plain start
  char* begin_;
  char* at_;
  char* end_;
  bool overflowed_ = false;
};

// "appendguard: trace: pid=P tid=T " (text) or "{\"type\":\"trace\",\"pid\":P,\"tid\":T,\"operation\":\""
// (JSON): the part of a line that is the same for every line of a thread, kept with its buffer.
constexpr size_t kTracePrefixCapacity = 96;
size_t format_trace_prefix(char* out, size_t capacity, pid_t pid, pid_t tid, bool json);

// Appends `prefix` and the rest of `e`'s line; the result equals format_trace / format_trace_json.
void append_trace_line(FastText& out, std::string_view prefix, const TraceEvent& e, bool json);
// The same in two parts: the head (prefix, operation, fd, `path` (e.path's text), up to the detail),
// which the trace buffer keeps for the next line of the same descriptor, and the rest.
void append_trace_head(FastText& out, std::string_view prefix, const TraceEvent& e, std::string_view path,
                       bool json);
void append_trace_tail(FastText& out, const TraceEvent& e, bool json);

}  // namespace appendguard
