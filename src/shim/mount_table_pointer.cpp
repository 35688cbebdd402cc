#include "shim/mount_table_pointer.h"

#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/first_use.h"
#include "shim/mount_guard.h"
#include "shim/real_io.h"
#include "shim/runtime.h"
#include "shim/signals_blocked_lock.h"

namespace appendguard {
namespace {

constinit FirstUse g_mount_reading;

// With every signal blocked: a signal handler of the program that needs the table while this thread
// reads it would wait for itself.
void read_mount_table_now() {
  const int error = errno;
  {
    InternalScope internal;
    AllSignalsBlocked blocked;
    load_mount_table();
    // Unreadable (no /proc): no table, as when it was read at start-up; closes no longer watched.
    g_all_mounts.clear_if_unread();
    g_mount_table.clear_if_unread();
    if (!g_all_mounts.load(std::memory_order_acquire)) g_files.watch_untracked_failures(false);
  }
  errno = error;
}

// On the alternate signal stack: inside a signal handler (a crash handler, typically), which may have
// interrupted malloc in this thread. The reading allocates, so it is left to a later use.
bool on_signal_stack() {
  stack_t ss{};
  return real_syscall(SYS_sigaltstack, nullptr, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
}

}  // namespace

const MountTable* MountTablePointer::read_at_first_use() const {
  // A vfork child shares its parent's memory: it allocates nothing there (and sees no table).
  if (g_mount_reading.pending()) {
    if (!owns_file_table() || on_signal_stack()) return nullptr;
    g_mount_reading.run(read_mount_table_now);
  }
  const MountTable* table = pointer_.load(std::memory_order_acquire);
  return table == unread() ? nullptr : table;
}

void read_mount_table_at_first_use() {
  g_mount_reading.arm();
  g_files.watch_untracked_failures(true);
  g_all_mounts.mark_unread();
  g_mount_table.mark_unread();
}

void reset_mount_reading_after_fork() {
  g_mount_reading.reset_after_fork();
}

}  // namespace appendguard
