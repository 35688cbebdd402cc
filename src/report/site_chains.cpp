#include "report/site_chains.h"

namespace appendguard {

SiteChain& SiteChains::start_recording() {
  last_found_ = next_++ % kChains;  // found first once published: a new site is opened from again
  SiteChain& chain = chains_[last_found_];
  chain.cfa = 0;  // not findable while it is written
  chain.links = 0;
  chain.first_kept = 0;
  return chain;
}

}  // namespace appendguard
