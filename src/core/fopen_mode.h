// fopen(3) mode strings, parsed the way glibc 2.36 parses them, and the enforce-mode rewrite. Pure.
#pragma once

#include <cstddef>

namespace appendguard {

struct FopenMode {
  bool valid = false;      // glibc fails EINVAL otherwise: the first character is not r, w or a
  char kind = 0;           // 'r', 'w' or 'a'
  bool plus = false;       // '+': read and write
  bool exclusive = false;  // 'x': O_EXCL
  bool cloexec = false;    // 'e': O_CLOEXEC
  bool has_ccs = false;    // ",ccs=CHARSET": a wide stream with its own conversion
  int flags = 0;           // what glibc passes to open(2)

  bool reads() const { return kind == 'r' || plus; }
  bool writes() const { return kind != 'r' || plus; }
};

// Like glibc: the first character decides; the next six may add '+', 'x', 'b', 'e', 'm', 'c' (and 't' or
// anything else is ignored); ",ccs=" is looked for after the last of '+', 'x', 'b'.
FopenMode parse_fopen_mode(const char* mode);

// The stream directions for fopencookie(3), which reads only the kind and '+': "r+", "w", "a+"...
const char* cookie_stream_mode(const FopenMode& mode);

// The enforce-mode mode string for a real fopen/freopen (a stream we cannot back ourselves): "r+" and "a+"
// become "a" (write-only, O_APPEND), "w+" becomes "w"; every other character stays where it was (each
// '+' becomes a 'b', which means nothing on POSIX). "a" adds O_CREAT: the caller checks that an "r+" file
// exists. Returns false (and leaves `out` alone) if `mode` is invalid or longer than capacity - 1.
bool rewrite_fopen_mode(const char* mode, char* out, size_t capacity);

}  // namespace appendguard
