#include "core/path.h"

#include <cstring>

#include "core/cpu_features.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace appendguard {
namespace {

// Appends the components of `part` to out[0..len), resolving "." and "..".
bool append_components(std::string_view part, char* out, size_t capacity, size_t& len) {
  size_t i = 0;
  while (i < part.size()) {
    while (i < part.size() && part[i] == '/') ++i;
    size_t start = i;
    while (i < part.size() && part[i] != '/') ++i;
    std::string_view component = part.substr(start, i - start);
    if (component.empty() || component == ".") continue;
    if (component == "..") {
      while (len > 1 && out[len - 1] != '/') --len;
      if (len > 1) --len;  // drop the separator, keep the root '/'
      continue;
    }
    size_t needed = (len > 1 ? 1 : 0) + component.size();
    if (len + needed + 1 > capacity) return false;
    if (len > 1) out[len++] = '/';
    std::memcpy(out + len, component.data(), component.size());
    len += component.size();
  }
  return true;
}

// Whether an absolute `path` is already normal: no empty, "." or ".." component and no trailing '/'
// ("/" itself is). Jumps from one '/' to the next with memchr: an open's path costs a few instructions a
// component instead of a copy byte by byte (issue 27).
bool already_normal(std::string_view path) {
  const char* p = path.data();
  const char* end = p + path.size();
  if (path.size() == 1) return true;
  while (true) {
    // p is at a '/': the component after it.
    const char* next = p + 1;
    if (next == end || *next == '/') return false;  // trailing '/' or "//"
    if (*next == '.') {
      if (next + 1 == end || next[1] == '/') return false;                      // "."
      if (next[1] == '.' && (next + 2 == end || next[2] == '/')) return false;  // ".."
    }
    const void* slash = std::memchr(next, '/', static_cast<size_t>(end - next));
    if (!slash) return true;
    p = static_cast<const char*>(slash);
  }
}

#if defined(__x86_64__)
// 32 pairs a window, for the paths of 33 bytes and more (issue 27: a 52-byte path took four windows of
// 16). Chosen where the processor has AVX2 (core/cpu_features.h, asked at the first such path; elsewhere,
// the 16-byte windows below).
// The 32 pairs (at[i], at[i + 1]): reads at[0..32].
[[gnu::target("avx2"), gnu::always_inline]] inline bool window_avx2(const char* at) {
  const __m256i slash = _mm256_set1_epi8('/');
  const __m256i dot = _mm256_set1_epi8('.');
  __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
  __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 1));
  __m256i next = _mm256_or_si256(_mm256_cmpeq_epi8(b, slash), _mm256_cmpeq_epi8(b, dot));
  return _mm256_movemask_epi8(_mm256_and_si256(_mm256_cmpeq_epi8(a, slash), next)) != 0;
}

// The same test of the pairs at at[0..32], as a mask, with at[0..32) stored at out.
[[gnu::target("avx2"), gnu::always_inline]] inline unsigned copy_window_avx2(const char* at, char* out,
                                                                             __m256i slash, __m256i dot) {
  __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
  __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 1));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), a);
  __m256i next = _mm256_or_si256(_mm256_cmpeq_epi8(b, slash), _mm256_cmpeq_epi8(b, dot));
  return static_cast<unsigned>(_mm256_movemask_epi8(_mm256_and_si256(_mm256_cmpeq_epi8(a, slash), next)));
}

[[gnu::target("avx2")]] bool has_slash_before_slash_or_dot_avx2(const char* p, size_t n) {
  size_t i = 0;
  for (; i + 33 <= n; i += 32) {
    if (window_avx2(p + i)) return true;
  }
  return i + 1 < n && window_avx2(p + n - 33);  // the last pairs, overlapping the previous window
}
#endif

}  // namespace

#if defined(__x86_64__)
// copy_plainly_normal_absolute of an absolute path of n >= 33 bytes: the windows copy p[0..n - 1) (the
// last pair's second byte is only read), without a branch per window up to 64 bytes.
[[gnu::target("avx2")]] bool copy_plainly_normal_avx2(const char* p, size_t n, char* out) {
  if (p[n - 1] == '/') return false;
  const __m256i slash = _mm256_set1_epi8('/');
  const __m256i dot = _mm256_set1_epi8('.');
  unsigned found = 0;
  size_t i = 0;
  for (; i + 65 <= n; i += 32) found |= copy_window_avx2(p + i, out + i, slash, dot);
  // 33 <= n - i < 65: the window at i and the last one, overlapping it, cover the pairs left.
  found |=
      copy_window_avx2(p + i, out + i, slash, dot) | copy_window_avx2(p + n - 33, out + n - 33, slash, dot);
  if (found != 0) return false;
  out[n - 1] = p[n - 1];
  out[n] = '\0';
  return true;
}

#endif

bool has_slash_before_slash_or_dot(const char* p, size_t n) {
  if (n < 2) return false;
#if defined(__x86_64__)
  if (n >= 33 && cpu_has_avx2()) return has_slash_before_slash_or_dot_avx2(p, n);
#endif
#if defined(__SSE2__)
  const __m128i slash = _mm_set1_epi8('/');
  const __m128i dot = _mm_set1_epi8('.');
  // The 16 pairs (at[i], at[i + 1]): reads at[0..16].
  auto window = [&](const char* at) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at + 1));
    __m128i next = _mm_or_si128(_mm_cmpeq_epi8(b, slash), _mm_cmpeq_epi8(b, dot));
    return _mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(a, slash), next)) != 0;
  };
  if (n < 17) {
    char padded[32] = {};  // the pair (p[n - 1], 0) never matches
    std::memcpy(padded, p, n);
    return window(padded);
  }
  size_t i = 0;
  for (; i + 17 <= n; i += 16) {
    if (window(p + i)) return true;
  }
  return i + 1 < n && window(p + n - 17);  // the last pairs, overlapping the previous window
#else
  for (size_t i = 0; i + 1 < n; ++i) {
    if (p[i] == '/' && (p[i + 1] == '/' || p[i + 1] == '.')) return true;
  }
  return false;
#endif
}

bool copy_plainly_normal_absolute_short(std::string_view path, char* out) {
  const char* p = path.data();
  const size_t n = path.size();
  if (n == 0 || p[0] != '/') return false;
  if ((n > 1 && p[n - 1] == '/') || has_slash_before_slash_or_dot(p, n)) return false;
  std::memcpy(out, p, n);
  out[n] = '\0';
  return true;
}

size_t join_plainly_normal(char* out, size_t base_length, std::string_view path, size_t capacity) {
  SplitPath split;
  if (path.empty() || path[0] == '/' || !split_normal_path({out, base_length}, path, split)) return 0;
  const size_t at = base_length == 1 ? 1 : base_length + 1;  // after the base and its '/'
  if (at + path.size() + 1 > capacity) return 0;
  out[at - 1] = '/';
  std::memcpy(out + at, path.data(), path.size());
  out[at + path.size()] = '\0';
  return at + path.size();
}

size_t normalize_path(std::string_view base_dir, std::string_view path, char* out, size_t capacity) {
  if (capacity < 2) return 0;
  bool absolute = !path.empty() && path[0] == '/';
  if (!absolute && (base_dir.empty() || base_dir[0] != '/')) return 0;
  // The vector test first (issue 27), the walk from slash to slash for what it cannot tell.
  const bool plain = absolute && path.size() > 1 && path.back() != '/' &&
                     !has_slash_before_slash_or_dot(path.data(), path.size());
  if (absolute && (plain || already_normal(path))) {
    if (path.size() + 1 > capacity) return 0;
    std::memcpy(out, path.data(), path.size());
    out[path.size()] = '\0';
    return path.size();
  }
  size_t len = 0;
  out[len++] = '/';
  if (!absolute && base_dir.size() > 1 &&
      ((base_dir.back() != '/' && !has_slash_before_slash_or_dot(base_dir.data(), base_dir.size())) ||
       already_normal(base_dir))) {  // a working directory is
    if (base_dir.size() + 1 > capacity) return 0;
    std::memcpy(out, base_dir.data(), base_dir.size());
    len = base_dir.size();
  } else if (!absolute && !append_components(base_dir, out, capacity, len)) {
    return 0;
  }
  if (!append_components(path, out, capacity, len)) return 0;
  out[len] = '\0';
  return len;
}

}  // namespace appendguard
