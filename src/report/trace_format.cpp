#include "report/trace_format.h"

#include "report/escape.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <cstdint>
#include <cstring>

#include "core/config.h"

namespace appendguard {

namespace {

constexpr char kHex[] = "0123456789abcdef";

// A byte that the text format escapes or that makes it quote the path, or that JSON escapes.
inline bool special(unsigned char c, bool json) {
  return c < 0x20 || c == '\\' || c == '"' || c == 0x7f || c == 0xe2 || (!json && c == ' ');
}

// The length of the start of `s` with no special byte: sixteen bytes at a time with SSE2 (every x86-64),
// else eight at a time (the bit tricks of "Bit Twiddling Hacks": a byte below n, a byte equal to n).
size_t plain_prefix(std::string_view s, bool json) {
  const unsigned char below = json ? 0x20 : 0x21;  // control bytes, and the space for the text format
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i highest_plain = _mm_set1_epi8(static_cast<char>(below - 1));
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i del = _mm_set1_epi8(0x7f);
  const __m128i lead = _mm_set1_epi8(static_cast<char>(0xe2));  // a direction control's first byte
  for (; i + 16 <= s.size(); i += 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    __m128i low = _mm_cmpeq_epi8(_mm_min_epu8(v, highest_plain), v);  // v <= below - 1, unsigned
    __m128i hits = _mm_or_si128(_mm_or_si128(low, _mm_cmpeq_epi8(v, quote)),
                                _mm_or_si128(_mm_cmpeq_epi8(v, backslash), _mm_cmpeq_epi8(v, del)));
    hits = _mm_or_si128(hits, _mm_cmpeq_epi8(v, lead));
    if (int mask = _mm_movemask_epi8(hits)) return i + static_cast<size_t>(__builtin_ctz(mask));
  }
#endif
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHighs = 0x8080808080808080ULL;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    auto zero_byte = [&](uint64_t x) { return (x - kOnes) & ~x & kHighs; };
    uint64_t hits = ((w - kOnes * below) & ~w & kHighs) | zero_byte(w ^ (kOnes * '"')) |
                    zero_byte(w ^ (kOnes * '\\')) | zero_byte(w ^ (kOnes * 0x7f)) |
                    zero_byte(w ^ (kOnes * 0xe2));
    if (hits) break;
  }
  while (i < s.size() && !special(static_cast<unsigned char>(s[i]), json)) ++i;
  return i;
}

}  // namespace

void FastText::unsigned_number(unsigned long long value) {
  // Two digits at a time from a table, straight into the output.
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  static constexpr unsigned long long kPowers[] = {10ULL,
                                                   100ULL,
                                                   1000ULL,
                                                   10000ULL,
                                                   100000ULL,
                                                   1000000ULL,
                                                   10000000ULL,
                                                   100000000ULL,
                                                   1000000000ULL,
                                                   10000000000ULL,
                                                   100000000000ULL,
                                                   1000000000000ULL,
                                                   10000000000000ULL,
                                                   100000000000000ULL,
                                                   1000000000000000ULL,
                                                   10000000000000000ULL,
                                                   100000000000000000ULL,
                                                   1000000000000000000ULL,
                                                   10000000000000000000ULL};
  size_t digits = 1;
  while (digits < 20 && value >= kPowers[digits - 1]) ++digits;
  if (!room(digits)) return;
  char* p = at_ + digits;
  while (value >= 100) {
    unsigned pair = static_cast<unsigned>(value % 100) * 2;
    value /= 100;
    *--p = kPairs[pair + 1];
    *--p = kPairs[pair];
  }
  if (value >= 10) {
    unsigned pair = static_cast<unsigned>(value) * 2;
    *--p = kPairs[pair + 1];
    *--p = kPairs[pair];
  } else {
    *--p = static_cast<char>('0' + value);
  }
  at_ += digits;
}

void FastText::signed_number(long long value) {
  if (value < 0) {
    character('-');
    unsigned_number(0ULL - static_cast<unsigned long long>(value));
  } else {
    unsigned_number(static_cast<unsigned long long>(value));
  }
}

void FastText::hex(unsigned long long value) {
  char digits[16];
  char* p = digits + sizeof digits;
  do {
    *--p = kHex[value & 15];
    value >>= 4;
  } while (value != 0);
  text({p, static_cast<size_t>(digits + sizeof digits - p)});
}

// Escapes as escape.cpp's add_escaped: \\ \" \n \t \r, other control bytes \xHH (text) or \u00HH (JSON).
void FastText::escaped(std::string_view s, bool json, size_t already) {
  // Cut as add_escaped cuts (escape.h, kMaxEscapedText).
  const char* const start = at_ - already;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    auto byte = static_cast<unsigned char>(c);
    if (static_cast<size_t>(at_ - start) + 12 > kMaxEscapedText) {
      text("...[+");
      unsigned_number(s.size() - i);
      character(']');
      return;
    }
    if (c == '\\' || c == '"') {
      character('\\');
      character(c);
    } else if (c == '\n') {
      text("\\n");
    } else if (c == '\t') {
      text("\\t");
    } else if (c == '\r') {
      text("\\r");
    } else if (const unsigned code = byte == 0xe2 ? direction_control_at(s, i) : 0) {
      if (json) {
        text("\\u");
        for (int shift = 12; shift >= 0; shift -= 4) character(kHex[(code >> shift) & 15]);
      } else {
        for (size_t k = i; k < i + 3; ++k) {
          text("\\x");
          character(kHex[static_cast<unsigned char>(s[k]) >> 4]);
          character(kHex[static_cast<unsigned char>(s[k]) & 15]);
        }
      }
      i += 2;
    } else if (byte < 0x20 || byte == 0x7f) {
      text(json ? "\\u00" : "\\x");
      character(kHex[byte >> 4]);
      character(kHex[byte & 15]);
    } else {
      character(c);
    }
  }
}

void FastText::path(std::string_view p) {
  // The common case, a path with nothing to escape or quote: one scan, one copy.
  if (plain_prefix(p, false) == p.size()) return text(p);
  bool quote = false;
  for (char c : p) quote = quote || c == ' ' || c == '"';
  if (quote) character('"');
  escaped(p, false);
  if (quote) character('"');
}

void FastText::json_text(std::string_view s) {
  size_t i = plain_prefix(s, true);
  text(s.substr(0, i));
  if (i < s.size()) escaped(s.substr(i), true, i);
}

void FastText::json_string(std::string_view s) {
  character('"');
  json_text(s);
  character('"');
}

size_t format_trace_prefix(char* out, size_t capacity, pid_t pid, pid_t tid, bool json) {
  FastText t(out, capacity);
  t.text(json ? "{\"type\":\"trace\",\"pid\":" : "appendguard: trace: pid=");
  t.signed_number(pid);
  t.text(json ? ",\"tid\":" : " tid=");
  t.signed_number(tid);
  t.text(json ? ",\"operation\":\"" : " ");
  return t.overflowed() ? 0 : t.size();
}

namespace {

void append_numbers(FastText& out, const TraceEvent& e) {
  for (int i = 0; i < e.number_count; ++i) {
    const TraceNumber& number = e.numbers[i];
    if (i > 0) out.character(' ');
    out.text({number.name, number.name_length});
    out.character('=');
    if (number.is_signed) {
      out.signed_number(static_cast<long long>(number.bits));
    } else {
      out.unsigned_number(number.bits);
    }
  }
}

}  // namespace

void append_trace_head(FastText& out, std::string_view prefix, const TraceEvent& e, std::string_view path,
                       bool json) {
  out.text(prefix);
  out.text(e.operation);
  if (json) {
    out.text("\",\"fd\":");
    out.signed_number(e.fd);
    out.text(",\"path\":");
    out.json_string(path);
    out.text(",\"detail\":\"");
  } else {
    out.text(" fd=");
    out.signed_number(e.fd);
    out.character(' ');
    out.path(path);
    out.character(' ');
  }
}

void FastText::microseconds(unsigned long long time_us) {
  unsigned_number(time_us / 1000000);
  character('.');
  char digits[6];
  unsigned long long fraction = time_us % 1000000;
  for (int i = 5; i >= 0; --i, fraction /= 10) digits[i] = static_cast<char>('0' + fraction % 10);
  text({digits, sizeof digits});
}

void append_trace_tail(FastText& out, const TraceEvent& e, bool json) {
  if (!json && e.time_us != 0) {
    out.text("time=");
    out.microseconds(e.time_us);
    out.character(' ');
  }
  append_numbers(out, e);
  if (json) {
    out.json_text(e.detail);
    out.text("\",\"result\":");
    out.signed_number(e.result < 0 ? -1 : e.result);
    if (e.result < 0) {
      out.text(",\"errno\":\"");
      out.text(errno_name(e.error));
      out.character('"');
    }
    if (e.time_us != 0) {
      out.text(",\"time\":");
      out.microseconds(e.time_us);
    }
    out.text("}\n");
    return;
  }
  out.text(e.detail);
  if (e.result < 0) {
    out.text(" -> -1 ");
    out.text(errno_name(e.error));
    out.character('\n');
  } else {
    out.text(" -> ");
    out.signed_number(e.result);
    out.character('\n');
  }
}

void append_trace_line(FastText& out, std::string_view prefix, const TraceEvent& e, bool json) {
  append_trace_head(out, prefix, e, e.path, json);
  append_trace_tail(out, e, json);
}

}  // namespace appendguard
