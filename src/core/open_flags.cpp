#include "core/open_flags.h"

#include <fcntl.h>

#include <cstdio>
#include <cstring>

namespace appendguard {

int rewrite_open_flags_by_truncation(int flags) {
  return (flags & ~(O_ACCMODE | O_APPEND)) | O_WRONLY | O_TRUNC;
}

size_t format_open_flags(int flags, char* out, size_t capacity) {
  struct Name {
    int bit;
    const char* name;
  };
  // Multi-bit flags (O_SYNC includes O_DSYNC, O_TMPFILE includes O_DIRECTORY) come before their parts.
  static constexpr Name kNames[] = {
      {O_CREAT, "O_CREAT"},       {O_EXCL, "O_EXCL"},           {O_NOCTTY, "O_NOCTTY"},
      {O_TRUNC, "O_TRUNC"},       {O_APPEND, "O_APPEND"},       {O_NONBLOCK, "O_NONBLOCK"},
      {O_SYNC, "O_SYNC"},         {O_DSYNC, "O_DSYNC"},         {O_DIRECT, "O_DIRECT"},
      {O_NOFOLLOW, "O_NOFOLLOW"}, {O_NOATIME, "O_NOATIME"},     {O_CLOEXEC, "O_CLOEXEC"},
      {O_PATH, "O_PATH"},         {O_LARGEFILE, "O_LARGEFILE"},
  };
  if (capacity == 0) return 0;
  size_t len = 0;
  auto put = [&](const char* s) {
    if (len > 0 && len + 1 < capacity) out[len++] = '|';
    for (; *s && len + 1 < capacity; ++s) out[len++] = *s;
  };
  int acc = flags & O_ACCMODE;
  put(acc == O_RDONLY ? "O_RDONLY" : acc == O_WRONLY ? "O_WRONLY" : acc == O_RDWR ? "O_RDWR" : "O_ACCMODE");
  int rest = flags & ~O_ACCMODE;
  if ((rest & O_TMPFILE) == O_TMPFILE) {
    put("O_TMPFILE");
    rest &= ~O_TMPFILE;
  } else if (rest & O_DIRECTORY) {
    put("O_DIRECTORY");
    rest &= ~O_DIRECTORY;
  }
  for (const Name& n : kNames) {
    if ((rest & n.bit) == n.bit && n.bit != 0) {
      put(n.name);
      rest &= ~n.bit;
    }
  }
  if (rest != 0) {
    char hex[24];
    std::snprintf(hex, sizeof hex, "0x%x", static_cast<unsigned>(rest));
    put(hex);
  }
  out[len] = '\0';
  return len;
}

}  // namespace appendguard
