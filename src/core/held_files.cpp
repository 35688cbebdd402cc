#include "core/held_files.h"

#include <fcntl.h>

#include <algorithm>

#include "core/open_flags.h"

namespace appendguard {

HeldOpen on_open_of_held(const HeldSession& s, int flags, unsigned children_now) {
  if (keeps_existing_bytes(flags) && s.children == children_now) return HeldOpen::kReuse;
  return HeldOpen::kCommitThenOpen;
}

bool HeldSet::add(const HeldSession& s, HeldSession& evicted) {
  bool full = count_ == kCapacity;
  if (full) {
    size_t oldest = 0;
    for (size_t i = 1; i < count_; ++i) {
      if (sessions_[i].order < sessions_[oldest].order) oldest = i;
    }
    evicted = sessions_[oldest];
    remove_at(oldest);
  }
  sessions_[count_] = s;
  sessions_[count_].order = ++next_order_;
  ++count_;
  return full;
}

void HeldSet::remove_at(size_t i) {
  sessions_[i] = sessions_[--count_];
  sessions_[count_] = HeldSession{};
}

bool HeldSet::take_file(dev_t device, ino_t inode, HeldSession& out) {
  for (size_t i = 0; i < count_; ++i) {
    if (sessions_[i].device == device && sessions_[i].inode == inode) {
      out = sessions_[i];
      remove_at(i);
      return true;
    }
  }
  return false;
}

bool HeldSet::take_fd(int fd, HeldSession& out) {
  for (size_t i = 0; i < count_; ++i) {
    if (sessions_[i].fd == fd) {
      out = sessions_[i];
      remove_at(i);
      return true;
    }
  }
  return false;
}

bool HeldSet::holds_fd(int fd) const {
  for (size_t i = 0; i < count_; ++i) {
    if (sessions_[i].fd == fd) return true;
  }
  return false;
}

size_t HeldSet::take_range(unsigned first, unsigned last, HeldSession* out, size_t capacity) {
  size_t taken = 0;
  // Oldest first, so that commits happen in the order the program closed the files.
  while (taken < capacity) {
    size_t best = count_;
    for (size_t i = 0; i < count_; ++i) {
      unsigned fd = static_cast<unsigned>(sessions_[i].fd);
      if (fd < first || fd > last) continue;
      if (best == count_ || sessions_[i].order < sessions_[best].order) best = i;
    }
    if (best == count_) break;
    out[taken++] = sessions_[best];
    remove_at(best);
  }
  return taken;
}

bool HeldSet::take_expired(uint64_t now, uint64_t limit, HeldSession& out) {
  if (limit == 0) return false;
  size_t oldest = count_;
  for (size_t i = 0; i < count_; ++i) {
    if (now - sessions_[i].held_at < limit || sessions_[i].held_at > now) continue;
    if (oldest == count_ || sessions_[i].order < sessions_[oldest].order) oldest = i;
  }
  if (oldest == count_) return false;
  out = sessions_[oldest];
  remove_at(oldest);
  return true;
}

uint64_t HeldSet::next_deadline(uint64_t limit) const {
  if (limit == 0 || count_ == 0) return 0;
  uint64_t earliest = sessions_[0].held_at;
  for (size_t i = 1; i < count_; ++i) earliest = std::min(earliest, sessions_[i].held_at);
  return earliest + limit;
}

void HeldSet::forget_all() {
  for (size_t i = 0; i < count_; ++i) sessions_[i] = HeldSession{};
  count_ = 0;
}

}  // namespace appendguard
