#include "core/fopen_mode.h"

#include <fcntl.h>

#include <cstring>

namespace appendguard {

FopenMode parse_fopen_mode(const char* mode) {
  FopenMode m;
  if (!mode) return m;
  int access = 0;
  int extra = 0;
  switch (mode[0]) {
    case 'r':
      access = O_RDONLY;
      break;
    case 'w':
      access = O_WRONLY;
      extra = O_CREAT | O_TRUNC;
      break;
    case 'a':
      access = O_WRONLY;
      extra = O_CREAT | O_APPEND;
      break;
    default:
      return m;
  }
  m.valid = true;
  m.kind = mode[0];
  const char* last_recognized = mode;
  for (int i = 1; i < 7 && mode[i] != '\0'; ++i) {
    switch (mode[i]) {
      case '+':
        m.plus = true;
        access = O_RDWR;
        last_recognized = mode + i;
        break;
      case 'x':
        m.exclusive = true;
        extra |= O_EXCL;
        last_recognized = mode + i;
        break;
      case 'b':
        last_recognized = mode + i;
        break;
      case 'e':
        m.cloexec = true;
        extra |= O_CLOEXEC;
        break;
      default:  // 'm' (mmap reads), 'c' (not a cancellation point), 't' and the rest change no open flag
        break;
    }
  }
  m.has_ccs = std::strstr(last_recognized + 1, ",ccs=") != nullptr;
  m.flags = access | extra;
  return m;
}

const char* cookie_stream_mode(const FopenMode& mode) {
  switch (mode.kind) {
    case 'r':
      return mode.plus ? "r+" : "r";
    case 'w':
      return mode.plus ? "w+" : "w";
    case 'a':
      return mode.plus ? "a+" : "a";
    default:
      return "";
  }
}

bool rewrite_fopen_mode(const char* mode, char* out, size_t capacity) {
  FopenMode m = parse_fopen_mode(mode);
  size_t length = m.valid ? std::strlen(mode) : 0;
  if (!m.valid || length + 1 > capacity) return false;
  std::memcpy(out, mode, length + 1);
  if (!m.plus) return true;
  if (m.kind == 'r') out[0] = 'a';
  // Only the '+' glibc reads (in the first seven characters) is a mode; a ",ccs=" name keeps its own.
  for (size_t i = 1; i < 7 && i < length; ++i) {
    if (out[i] == '+') out[i] = 'b';
  }
  return true;
}

}  // namespace appendguard
