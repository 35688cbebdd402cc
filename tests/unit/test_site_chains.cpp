#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>

#include "report/site_chains.h"

using namespace appendguard;

namespace {

// A stack of words: the recording function's CFA is the address of words[1], so that its return
// address (the chain's link 0, at offset 0) is words[0].
struct FakeStack {
  uintptr_t words[32] = {};
  FakeStack() = default;
  // Every word a distinct return address: base + its index.
  explicit FakeStack(uintptr_t base) {
    for (int i = 0; i < 32; ++i) words[i] = base + static_cast<uintptr_t>(i);
  }
  uintptr_t cfa() const { return reinterpret_cast<uintptr_t>(&words[1]); }
};

// What find and find_last both miss for a chain recorded at `cfa` for SiteChain::key(24, 1): another
// request (fewer frames, the whole scope), another place on the stack.
template <typename Lookup>
void check_other_requests_miss(Lookup&& lookup, uintptr_t cfa) {
  void* frames[24] = {};
  CHECK(lookup(cfa, SiteChain::key(16, 1), frames) == -1);
  CHECK(lookup(cfa, SiteChain::key(24, 0), frames) == -1);
  CHECK(lookup(cfa + 8, SiteChain::key(24, 1), frames) == -1);
}

// Records the chain whose link i is the return address words[slot[i]], keeping those from first_kept on.
void record(SiteChains& chains, const FakeStack& stack, const int* slots, int links, int first_kept,
            int max_frames = 24, int scope = 1) {
  SiteChain& chain = chains.start_recording();
  chain.request = SiteChain::key(max_frames, scope);
  chain.links = links;
  chain.first_kept = first_kept;
  for (int i = 0; i < links; ++i) {
    chain.offset[i] = static_cast<uint32_t>(slots[i] * sizeof(uintptr_t));
    chain.address[i] = stack.words[slots[i]];
  }
  SiteChains::publish(chain, stack.cfa());
}

}  // namespace

TEST_CASE("a remembered site is read back only when every return address is where it was") {
  auto chains = std::make_unique<SiteChains>();
  FakeStack stack(0x1000);
  const int slots[] = {0, 3, 7, 8, 12};  // this library's frame, then four kept
  void* frames[24] = {};
  CHECK(chains->find(stack.cfa(), SiteChain::key(24, 1), frames) == -1);  // nothing remembered yet
  record(*chains, stack, slots, 5, 1);

  REQUIRE(chains->find(stack.cfa(), SiteChain::key(24, 1), frames) == 4);
  CHECK(frames[0] == reinterpret_cast<void*>(0x1003));
  CHECK(frames[3] == reinterpret_cast<void*>(0x100c));

  check_other_requests_miss([&](uintptr_t cfa, uint32_t key, void** f) { return chains->find(cfa, key, f); },
                            stack.cfa());

  // Called from elsewhere: the outermost kept frame's return address differs.
  stack.words[12] = 0x2000;
  CHECK(chains->find(stack.cfa(), SiteChain::key(24, 1), frames) == -1);
  stack.words[12] = 0x100c;
  // Words between the return addresses (locals) do not matter.
  stack.words[5] = 0x3000;
  CHECK(chains->find(stack.cfa(), SiteChain::key(24, 1), frames) == 4);
  // Nor does what lies beyond the chain.
  stack.words[20] = 0x4000;
  CHECK(chains->find(stack.cfa(), SiteChain::key(24, 1), frames) == 4);
}

TEST_CASE("two chains at the same stack address are both remembered, and the oldest is replaced") {
  auto chains = std::make_unique<SiteChains>();
  FakeStack a(0x1000);
  FakeStack b(0x5000);
  const int slots[] = {0, 2, 4};
  record(*chains, a, slots, 3, 1);
  // b's chain, recorded at a's address (the same function called from elsewhere at the same depth).
  SiteChain& chain = chains->start_recording();
  chain.request = SiteChain::key(24, 1);
  chain.links = 3;
  chain.first_kept = 1;
  for (int i = 0; i < 3; ++i) {
    chain.offset[i] = static_cast<uint32_t>(slots[i] * sizeof(uintptr_t));
    chain.address[i] = b.words[slots[i]];
  }
  SiteChains::publish(chain, a.cfa());
  void* frames[24] = {};
  REQUIRE(chains->find(a.cfa(), SiteChain::key(24, 1), frames) == 2);
  CHECK(frames[0] == reinterpret_cast<void*>(0x1002));
  FakeStack saved = a;
  for (int i : slots) a.words[i] = b.words[i];
  REQUIRE(chains->find(a.cfa(), SiteChain::key(24, 1), frames) == 2);
  CHECK(frames[0] == reinterpret_cast<void*>(0x5002));
  a = saved;
  // SiteChains::kChains more recordings elsewhere push both out.
  for (int i = 0; i < SiteChains::kChains; ++i) record(*chains, b, slots, 3, 1, 24 - i);
  CHECK(chains->find(a.cfa(), SiteChain::key(24, 1), frames) == -1);
}

TEST_CASE("a chain whose frames are all skipped reads back no frames") {
  auto chains = std::make_unique<SiteChains>();
  FakeStack stack;
  stack.words[0] = 0x10;
  const int slots[] = {0};
  record(*chains, stack, slots, 1, 1);
  void* frames[24] = {};
  CHECK(chains->find(stack.cfa(), SiteChain::key(24, 1), frames) == 0);
}

TEST_CASE(
    "a chain referenced at the open hook's frame keeps every link, and any one slot differing is a miss") {
  // The hook's CFA: the chain's link 0 is the program's return address (no frame of this library
  // between), so every link is a kept frame, written out as it is compared.
  auto chains = std::make_unique<SiteChains>();
  FakeStack stack;
  for (int i = 0; i < 32; ++i) stack.words[i] = 0x7000 + static_cast<uintptr_t>(i);
  const int slots[] = {0, 2, 5, 9, 10, 14};
  record(*chains, stack, slots, 6, 0);
  void* frames[24] = {};
  REQUIRE(chains->find(stack.cfa(), SiteChain::key(24, 1), frames) == 6);
  for (int i = 0; i < 6; ++i) CHECK(frames[i] == reinterpret_cast<void*>(0x7000 + slots[i]));
  CHECK(frames[6] == nullptr);  // nothing written beyond the kept frames

  // Each slot in turn holding another address (the same depth reached through another call): a miss.
  for (int slot : slots) {
    const uintptr_t saved = stack.words[slot];
    stack.words[slot] = saved + 0x100;
    CHECK(chains->find(stack.cfa(), SiteChain::key(24, 1), frames) == -1);
    stack.words[slot] = saved;
  }
  // The same stack read from 16 bytes higher (another hook frame's CFA): not this chain.
  CHECK(chains->find(stack.cfa() + 16, SiteChain::key(24, 1), frames) == -1);
  REQUIRE(chains->find(stack.cfa(), SiteChain::key(24, 1), frames) == 6);
  CHECK(frames[5] == reinterpret_cast<void*>(0x700e));
}

TEST_CASE("the skipped links of a chain (libc's above the program's call) are compared too") {
  auto chains = std::make_unique<SiteChains>();
  FakeStack stack;
  for (int i = 0; i < 32; ++i) stack.words[i] = 0x9000 + static_cast<uintptr_t>(i);
  const int slots[] = {0, 1, 4, 6};  // two libc frames, then two kept
  record(*chains, stack, slots, 4, 2);
  void* frames[24] = {};
  REQUIRE(chains->find(stack.cfa(), SiteChain::key(24, 1), frames) == 2);
  CHECK(frames[0] == reinterpret_cast<void*>(0x9004));
  CHECK(frames[1] == reinterpret_cast<void*>(0x9006));
  stack.words[1] = 0x1;  // another libc function's call
  CHECK(chains->find(stack.cfa(), SiteChain::key(24, 1), frames) == -1);
}

TEST_CASE("a request's key tells the frames wanted and the scope apart") {
  STATIC_REQUIRE(SiteChain::key(24, 1) != SiteChain::key(24, 0));
  STATIC_REQUIRE(SiteChain::key(24, 1) != SiteChain::key(23, 1));
  STATIC_REQUIRE(SiteChain::key(12, 0) != SiteChain::key(6, 1));
  STATIC_REQUIRE(SiteChain::key(SiteChain::kMaxLinks, 1) != SiteChain::key(SiteChain::kMaxLinks, 0));
}

TEST_CASE("find_last reads back the chain found (or recorded) last only, as find would") {
  auto chains = std::make_unique<SiteChains>();
  FakeStack a(0x1000);
  FakeStack b(0x5000);
  void* frames[24] = {};
  CHECK(chains->find_last(a.cfa(), SiteChain::key(24, 1), frames) == -1);  // nothing remembered yet
  const int slots[] = {0, 2, 4, 6};
  record(*chains, a, slots, 4, 1);
  REQUIRE(chains->find_last(a.cfa(), SiteChain::key(24, 1), frames) == 3);
  CHECK(frames[0] == reinterpret_cast<void*>(0x1002));
  CHECK(frames[2] == reinterpret_cast<void*>(0x1006));
  check_other_requests_miss(
      [&](uintptr_t cfa, uint32_t key, void** f) { return chains->find_last(cfa, key, f); }, a.cfa());
  // Another return address: not this chain.
  a.words[0] = 0x9000;  // a skipped link (this library's frame) differs
  CHECK(chains->find_last(a.cfa(), SiteChain::key(24, 1), frames) == -1);
  a.words[0] = 0x1000;
  // b's chain is recorded after a's: find_last tries b's alone, find still finds a's (and makes it last).
  record(*chains, b, slots, 4, 1);
  CHECK(chains->find_last(a.cfa(), SiteChain::key(24, 1), frames) == -1);
  REQUIRE(chains->find(a.cfa(), SiteChain::key(24, 1), frames) == 3);
  CHECK(chains->find_last(a.cfa(), SiteChain::key(24, 1), frames) == 3);
  CHECK(frames[1] == reinterpret_cast<void*>(0x1004));
  CHECK(chains->find_last(b.cfa(), SiteChain::key(24, 1), frames) == -1);
  REQUIRE(chains->find(b.cfa(), SiteChain::key(24, 1), frames) == 3);
  CHECK(chains->find_last(b.cfa(), SiteChain::key(24, 1), frames) == 3);
  CHECK(frames[0] == reinterpret_cast<void*>(0x5002));
}
