#include "fault_injector.hpp"

#include <algorithm>
#include <cerrno>

namespace appendonlyfs {

FaultDecision FaultInjector::before_write(std::uint64_t size) {
  std::lock_guard lock(mutex_);
  ++write_count_;
  if (options_.eio_every != 0 && write_count_ % options_.eio_every == 0) {
    return {FaultKind::eio, EIO, 0, "eio_every"};
  }
  FaultDecision decision{FaultKind::none, 0, size, {}};
  if (options_.fail_after) {
    const std::uint64_t remaining =
        *options_.fail_after > bytes_written_ ? *options_.fail_after - bytes_written_ : 0;
    if (remaining == 0) return {FaultKind::enospc, ENOSPC, 0, "fail_after"};
    if (remaining < decision.accept) decision = {FaultKind::short_write, 0, remaining, "fail_after"};
  }
  if (options_.short_writes != 0 && options_.short_writes < decision.accept) {
    decision = {FaultKind::short_write, 0, options_.short_writes, "short_writes"};
  }
  bytes_written_ += decision.accept;
  return decision;
}

void FaultInjector::after_write(const FaultDecision& decision, std::uint64_t written) {
  if (written >= decision.accept) return;
  std::lock_guard lock(mutex_);
  bytes_written_ -= decision.accept - written;
}

}  // namespace appendonlyfs
