#include <catch2/catch.hpp>
#include <cerrno>

#include "fault_injector.hpp"

using namespace appendonlyfs;

namespace {

FaultOptions with(std::uint64_t short_writes, std::optional<std::uint64_t> fail_after,
                  std::uint64_t eio_every) {
  FaultOptions options;
  options.short_writes = short_writes;
  options.fail_after = fail_after;
  options.eio_every = eio_every;
  return options;
}

}  // namespace

TEST_CASE("no options, no faults") {
  FaultInjector faults(FaultOptions{});
  for (int i = 0; i < 10; ++i) {
    const FaultDecision decision = faults.before_write(100);
    CHECK(decision.kind == FaultKind::none);
    CHECK(decision.accept == 100);
  }
}

TEST_CASE("short_writes caps every write") {
  FaultInjector faults(with(3, std::nullopt, 0));
  FaultDecision decision = faults.before_write(8);
  CHECK(decision.kind == FaultKind::short_write);
  CHECK(decision.accept == 3);
  CHECK(decision.cause == "short_writes");
  decision = faults.before_write(2);
  CHECK(decision.kind == FaultKind::none);
  CHECK(decision.accept == 2);
}

TEST_CASE("fail_after accepts up to the budget, then ENOSPC") {
  FaultInjector faults(with(0, 10, 0));
  CHECK(faults.before_write(8).accept == 8);
  const FaultDecision partial = faults.before_write(6);
  CHECK(partial.kind == FaultKind::short_write);
  CHECK(partial.accept == 2);
  const FaultDecision full = faults.before_write(1);
  CHECK(full.kind == FaultKind::enospc);
  CHECK(full.error == ENOSPC);
}

TEST_CASE("fail_after=0 fails the first write") {
  CHECK(FaultInjector(with(0, 0, 0)).before_write(1).error == ENOSPC);
}

TEST_CASE("bytes the store did not take go back to the budget") {
  FaultInjector faults(with(0, 10, 0));
  const FaultDecision decision = faults.before_write(10);
  faults.after_write(decision, 4);
  CHECK(faults.before_write(10).accept == 6);
}

TEST_CASE("eio_every fails every Nth write") {
  FaultInjector faults(with(0, std::nullopt, 3));
  CHECK(faults.before_write(1).error == 0);
  CHECK(faults.before_write(1).error == 0);
  CHECK(faults.before_write(1).error == EIO);
  CHECK(faults.before_write(1).error == 0);
  CHECK(faults.before_write(1).error == 0);
  const FaultDecision sixth = faults.before_write(1);
  CHECK(sixth.kind == FaultKind::eio);
  CHECK(sixth.accept == 0);
}

TEST_CASE("EIO writes do not consume the byte budget") {
  FaultInjector faults(with(0, 2, 1));
  CHECK(faults.before_write(5).error == EIO);
}
