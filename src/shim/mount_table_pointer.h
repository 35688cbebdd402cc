// The mount table is read at its first use, not at start-up (issue 27: reading /proc/self/mountinfo and
// building the table was ~90 us of every fork + exec of /bin/true, and most programs never open a file
// for writing). g_mount_table and g_all_mounts are MountTablePointers: until the table is read they hold
// a mark, and the first load that finds it reads the table (once per process, any thread; the others
// wait for it), then gives what a load at start-up gave.
#pragma once

#include <stdint.h>

#include <atomic>

#include "core/hidden.h"
#include "core/mount_table.h"

namespace appendguard {

class MountTablePointer {
 public:
  constexpr MountTablePointer() = default;

  const MountTable* load(std::memory_order order) const {
    const MountTable* table = pointer_.load(order);
    if (__builtin_expect(table == unread(), 0)) return read_at_first_use();
    return table;
  }
  void store(const MountTable* table, std::memory_order order) { pointer_.store(table, order); }

  // At start-up (runtime.cpp): nothing read yet.
  void mark_unread() { pointer_.store(unread(), std::memory_order_release); }
  // After a reading that found no table (mountinfo unreadable): null, as it was at start-up.
  void clear_if_unread() {
    const MountTable* mark = unread();
    pointer_.compare_exchange_strong(mark, nullptr, std::memory_order_acq_rel);
  }

 private:
  static const MountTable* unread() { return reinterpret_cast<const MountTable*>(uintptr_t{1}); }
  // Reads the table (mount_guard.cpp); null where it cannot be read now (a vfork child).
  APPENDGUARD_HIDDEN const MountTable* read_at_first_use() const;

  std::atomic<const MountTable*> pointer_{nullptr};
};

// At start-up, instead of reading the table: the first load reads it. Until then every close of an
// untracked descriptor is watched (unguarded_notice.h), which the reading then sets as the table says.
void read_mount_table_at_first_use();
// In a fork child (its handler): a reading another thread of the parent was making is made again.
void reset_mount_reading_after_fork();

}  // namespace appendguard
