// A fixed-capacity text buffer filled with fmt, never allocating: reports are built inside hooks, possibly
// on a thread interrupted in malloc.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <string_view>

namespace appendguard {

class TextBuffer {
 public:
  TextBuffer(char* storage, size_t capacity) : data_(storage), capacity_(capacity) {}

  template <typename... Args>
  void add(fmt::format_string<Args...> format, Args&&... args) {
    if (size_ >= capacity_) return;
    auto result = fmt::format_to_n(data_ + size_, capacity_ - size_, format, std::forward<Args>(args)...);
    size_ += result.size < capacity_ - size_ ? result.size : capacity_ - size_;
  }
  void add_text(std::string_view text) {
    size_t n = text.size() < capacity_ - size_ ? text.size() : capacity_ - size_;
    for (size_t i = 0; i < n; ++i) data_[size_ + i] = text[i];
    size_ += n;
  }
  bool full() const { return size_ >= capacity_; }
  // Every line we write ends with a newline: a line cut at the capacity gets one as its last byte (so
  // that the next line, a violation report, cannot be glued onto it).
  void end_line() {
    if (capacity_ == 0 || (size_ > 0 && data_[size_ - 1] == '\n')) return;
    if (size_ < capacity_) {
      data_[size_++] = '\n';
    } else {
      data_[capacity_ - 1] = '\n';
    }
  }
  std::string_view view() const { return {data_, size_}; }
  void clear() { size_ = 0; }

 private:
  char* data_;
  size_t capacity_;
  size_t size_ = 0;
};

}  // namespace appendguard
