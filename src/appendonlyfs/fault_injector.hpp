// Injected write faults for tests: short writes, ENOSPC after a byte budget, EIO every Nth write.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>

namespace appendonlyfs {

struct FaultOptions {
  std::uint64_t short_writes = 0;           // 0: off; else every write accepts at most this many bytes
  std::optional<std::uint64_t> fail_after;  // total bytes the mount accepts before ENOSPC
  std::uint64_t eio_every = 0;              // 0: off; else every Nth write fails EIO
  std::uint64_t delay_us = 0;               // sleep before each write
  bool flush_eio = false;                   // every flush (close) fails EIO, as a store whose upload failed
};

enum class FaultKind { none, eio, enospc, short_write };

struct FaultDecision {
  FaultKind kind = FaultKind::none;
  int error = 0;
  std::uint64_t accept = 0;  // bytes the write may store (== size unless short or failed)
  std::string_view cause;    // which option caused the fault
};

// Thread-safe: writes from several FUSE worker threads share the counters.
class FaultInjector {
 public:
  explicit FaultInjector(FaultOptions options) : options_(options) {}

  // Call for a write the profile accepted; reserves the accepted bytes against fail_after.
  FaultDecision before_write(std::uint64_t size);

  // Returns the part of the reservation that the backing store did not take.
  void after_write(const FaultDecision& decision, std::uint64_t written);

  const FaultOptions& options() const { return options_; }

 private:
  const FaultOptions options_;
  std::mutex mutex_;
  std::uint64_t write_count_ = 0;
  std::uint64_t bytes_written_ = 0;
};

}  // namespace appendonlyfs
