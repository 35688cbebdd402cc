#include "core/carried_fds.h"

#include <fcntl.h>

namespace appendguard {
namespace {

class Writer {
 public:
  Writer(char* out, size_t capacity) : out_(out), capacity_(capacity) {}
  void text(const char* s) {
    while (*s) put(*s++);
  }
  void hex(uint64_t value) {
    char digits[16];
    int n = 0;
    do {
      digits[n++] = "0123456789abcdef"[value & 0xf];
      value >>= 4;
    } while (value != 0);
    while (n > 0) put(digits[--n]);
  }
  void put(char c) {
    if (length_ + 1 < capacity_) {
      out_[length_] = c;
    } else {
      overflowed_ = true;
    }
    ++length_;
  }
  size_t length() const { return length_; }
  bool overflowed() const { return overflowed_; }
  // Goes back to an earlier length (drops a record that did not fit).
  void truncate(size_t length) {
    length_ = length;
    overflowed_ = false;
  }
  void finish() {
    if (capacity_ > 0) out_[length_ < capacity_ ? length_ : capacity_ - 1] = '\0';
  }

 private:
  char* out_;
  size_t capacity_;
  size_t length_ = 0;
  bool overflowed_ = false;
};

// Reads a hex number up to `end` (',' or ';' or NUL). False if there is none.
bool read_hex(const char*& s, uint64_t& value) {
  value = 0;
  const char* start = s;
  for (; *s; ++s) {
    char c = *s;
    int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) break;
    if (s - start >= 16) return false;
    value = value << 4 | static_cast<uint64_t>(digit);
  }
  return s != start;
}

bool expect(const char*& s, char c) {
  if (*s != c) return false;
  ++s;
  return true;
}

constexpr int kPlacement = O_ACCMODE | O_APPEND;

}  // namespace

size_t format_carried_fds(CarrierReader reader, const CarriedFd* fds, size_t count, char* out,
                          size_t capacity) {
  Writer w(out, capacity);
  w.text(kCarriedFdsVariable);
  w.put('=');
  if (reader.complete && !reader.is_child) w.put('c');
  if (reader.is_child) w.put('p');
  w.hex(static_cast<uint64_t>(reader.pid));
  size_t written = 0;
  for (size_t i = 0; i < count && !w.overflowed(); ++i) {
    size_t before = w.length();
    const CarriedFd& f = fds[i];
    w.put(';');
    w.hex(static_cast<uint64_t>(f.fd));
    w.put(',');
    w.hex(f.device);
    w.put(',');
    w.hex(f.inode);
    w.put(',');
    w.hex(static_cast<uint32_t>(f.original_flags));
    w.put(',');
    w.hex(static_cast<uint32_t>(f.effective_flags));
    w.put(',');
    w.hex(f.position);
    if (w.overflowed()) {
      w.truncate(before);
      break;
    }
    ++written;
  }
  w.finish();
  return written;
}

size_t count_carried_records(const char* text) {
  size_t count = 0;
  for (const char* s = text; s && *s; ++s) count += *s == ';';
  return count;
}

size_t parse_carried_fds(const char* text, pid_t self, pid_t parent, CarriedFd* out, size_t capacity,
                         bool* complete) {
  if (complete) *complete = false;
  if (!text) return 0;
  const char* s = text;
  const bool says_complete = *s == 'c';
  if (says_complete) ++s;
  const bool for_child = *s == 'p';
  if (for_child) ++s;
  uint64_t pid = 0;
  if (!read_hex(s, pid) || pid != static_cast<uint64_t>(for_child ? parent : self)) return 0;
  size_t count = 0;
  while (*s && count < capacity) {
    uint64_t fd = 0, original = 0, effective = 0;
    CarriedFd f;
    if (!expect(s, ';') || !read_hex(s, fd) || !expect(s, ',') || !read_hex(s, f.device) || !expect(s, ',') ||
        !read_hex(s, f.inode) || !expect(s, ',') || !read_hex(s, original) || !expect(s, ',') ||
        !read_hex(s, effective) || !expect(s, ',') || !read_hex(s, f.position)) {
      return 0;
    }
    if (fd > 0x7fffffff || original > 0xffffffff || effective > 0xffffffff) return 0;
    f.fd = static_cast<int>(fd);
    f.original_flags = static_cast<int>(original);
    f.effective_flags = static_cast<int>(effective);
    out[count++] = f;
  }
  if (*s != '\0') return 0;
  if (complete) *complete = says_complete && !for_child;
  return count;
}

const CarriedFd* match_carried_fd(const CarriedFd* fds, size_t count, int fd, uint64_t device, uint64_t inode,
                                  int kernel_flags) {
  const CarriedFd* same_file = nullptr;
  for (size_t i = 0; i < count; ++i) {
    const CarriedFd& f = fds[i];
    if (f.device != device || f.inode != inode) continue;
    if (f.fd == fd) return &f;
    if ((f.effective_flags & kPlacement) != (kernel_flags & kPlacement)) continue;
    const bool rewritten = f.original_flags != f.effective_flags;
    if (!same_file || (rewritten && same_file->original_flags == same_file->effective_flags)) same_file = &f;
  }
  return same_file;
}

}  // namespace appendguard
