#include <catch2/catch.hpp>

#include <memory>

#include "core/fd_slots.h"

using namespace appendguard;

namespace {
using Slots = FdSlots<int, 1 << 20>;
constexpr int kHigh = Slots::kInline + 3 * Slots::kChunk + 5;  // in a chunk that is mapped when used
}  // namespace

TEST_CASE("reserve_slot: the slot a later store goes to, its chunk mapped and its group marked used") {
  auto slots = std::make_unique<Slots>();
  int a = 1, b = 2;
  CHECK(slots->reserve_slot(-1) == nullptr);
  CHECK(slots->reserve_slot(1 << 20) == nullptr);
  CHECK(slots->next_used(0, kHigh) == kHigh + 1);  // nothing marked by the refused numbers

  std::atomic<int*>* low = slots->reserve_slot(7);
  REQUIRE(low != nullptr);
  CHECK(slots->next_used(0, 100) == 0);  // 7's group (0-63) is marked
  low->store(&a);
  CHECK(slots->load(7, std::memory_order_relaxed) == &a);

  CHECK(slots->load(kHigh, std::memory_order_relaxed) == nullptr);  // its chunk is not mapped yet
  std::atomic<int*>* high = slots->reserve_slot(kHigh);
  REQUIRE(high != nullptr);
  CHECK(slots->next_used(64, kHigh) == kHigh / 64 * 64);
  high->store(&b);
  CHECK(slots->load(kHigh, std::memory_order_relaxed) == &b);
  CHECK(&(*slots)[kHigh] == high);  // the same slot as operator[]'s
}

TEST_CASE("existing_slot: a slot that may hold a pointer, found without mapping or marking anything") {
  auto slots = std::make_unique<Slots>();
  int a = 1;
  CHECK(slots->existing_slot(-1) == nullptr);
  CHECK(slots->existing_slot(1 << 20) == nullptr);
  CHECK(slots->existing_slot(kHigh) == nullptr);  // its chunk was never mapped: no pointer can be there
  CHECK(slots->reserve_slot(kHigh + 1) != nullptr);
  std::atomic<int*>* high = slots->existing_slot(kHigh);  // now mapped (a neighbour's reserve)
  REQUIRE(high != nullptr);
  CHECK(high == &(*slots)[kHigh]);

  std::atomic<int*>* low = slots->existing_slot(300);
  REQUIRE(low != nullptr);
  CHECK(slots->next_used(256, 319) == 320);  // 300's group stays unmarked
  (*slots)[300].store(&a);
  CHECK(slots->existing_slot(300)->load() == &a);
}
