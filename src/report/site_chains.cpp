#include "report/site_chains.h"

#include <cstring>

namespace appendguard {

namespace {

// The stack is read word by word above the recording frame: with ASan or TSan, such reads of other
// frames are not the program's accesses to watch.
__attribute__((no_sanitize("address", "thread"))) bool on_the_stack(const SiteChain& chain, uintptr_t cfa) {
  const uintptr_t base = cfa - 8;
  for (int i = 0; i < chain.links; ++i) {
    if (*reinterpret_cast<const volatile uintptr_t*>(base + chain.offset[i]) != chain.address[i])
      return false;
  }
  return true;
}

}  // namespace

int SiteChains::find(uintptr_t cfa, int max_frames, int scope, void** frames) const {
  for (const SiteChain& chain : chains_) {
    if (chain.cfa != cfa || chain.max_frames != max_frames || chain.scope != scope) continue;
    if (!on_the_stack(chain, cfa)) continue;
    // One copy of the kept frames (issue 27: a loop of one word at a time was a fifth of find).
    const int count = chain.links > chain.first_kept ? chain.links - chain.first_kept : 0;
    std::memcpy(frames, &chain.address[chain.first_kept], static_cast<size_t>(count) * sizeof(void*));
    return count;
  }
  return -1;
}

SiteChain& SiteChains::start_recording() {
  SiteChain& chain = chains_[next_++ % kChains];
  chain.cfa = 0;  // not findable while it is written
  chain.links = 0;
  chain.first_kept = 0;
  return chain;
}

}  // namespace appendguard
