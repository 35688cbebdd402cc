// The sites of a thread's guarded opens, remembered so that an open made again from the same place is
// recorded without unwinding (issue 27: unwinding at every open cost about 1,200 instructions).
//
// A chain is what an unwind found above a frame boundary, its canonical frame address (CFA): each frame's
// return address and where on the stack it was, as an offset from that CFA. The CFA is the open hook's
// (the program's call: shim/guard_open.h OpenRequest::cfa), or the recording function's own where the
// hook's is not known; the frames below it are this library's and are not compared. When a site is
// recorded again at the same CFA and every one of those stack slots holds the same return address again,
// the stack above it is that chain (each frame's return address sits where its callee's frame ends: the
// same addresses at the same places are the same calls), and the frames the site keeps are read back
// from it. Anything else (another caller, another depth, a frame of another size) is a miss, and the
// caller unwinds. Pure: the stack is read through the given CFA, so tests give it an array.
#pragma once

#include <cstddef>
#include <cstdint>

namespace appendguard {

struct SiteChain {
  // Return addresses checked: this library's frames and libc's above the program's, and the frames
  // kept (24 at most: kOpenFrames).
  static constexpr int kMaxLinks = 56;
  // What was asked (the frames wanted, and report/backtrace.h's StackScope), in one word that find
  // compares at once.
  static constexpr uint32_t key(int max_frames, int scope) {
    return static_cast<uint32_t>(max_frames) << 1 | static_cast<uint32_t>(scope & 1);
  }
  uintptr_t cfa = 0;     // 0: unused
  uint32_t request = 0;  // key(max_frames, scope)
  int links = 0;
  int first_kept = 0;               // the kept frames are address[first_kept .. links - 1]
  uint32_t offset[kMaxLinks] = {};  // address[i] is the word at cfa - 8 + offset[i]
  uintptr_t address[kMaxLinks] = {};
};

class SiteChains {
 public:
  static constexpr int kChains = 8;

  // The kept frames of a chain recorded at `cfa` for the same request (SiteChain::key) that is on the
  // stack now, written into `frames` (at least max_frames of room) as they are read; -1 if none is
  // (`frames` may then hold some words read). Reads the stack slots of a candidate chain innermost first,
  // and stops at the first that differs. The chain found (or recorded) last is tried first.
  // A guarded open reads back with find_last first, and asks find only when that misses.
  inline int find(uintptr_t cfa, uint32_t request, void** frames);
  // The same for the chain found (or recorded) last alone, the one `find` tries first: -1 if it is not
  // on the stack (`find` then tries the others). Inline on every guarded open, whose other chains are
  // searched out of line only when it misses (issue 27: the whole search inline took six saved
  // registers on every open).
  inline int find_last(uintptr_t cfa, uint32_t request, void** frames) const;

  // Where to record a new chain (it replaces the oldest); not findable until `publish` gives it its CFA,
  // the last thing written.
  SiteChain& start_recording();
  static void publish(SiteChain& chain, uintptr_t cfa) { chain.cfa = cfa; }

 private:
  SiteChain chains_[kChains];
  unsigned next_ = 0;
  unsigned last_found_ = 0;  // < kChains
};

namespace site_chains_detail {

// The stack is read word by word above the recording frame: with ASan or TSan, such reads of other
// frames are not the program's accesses to watch (and these functions are then not inlined). A word that
// may alias anything (a return address, written by a call): not volatile, so that its address is one
// operand of the load.
using StackWord [[gnu::may_alias]] = uintptr_t;
__attribute__((no_sanitize("address", "thread"))) inline uintptr_t word_at(const char* base,
                                                                           uint32_t offset) {
  return *reinterpret_cast<const StackWord*>(base + offset);
}

// Whether every slot of `chain` holds its return address, the kept ones written to `frames` as they are
// compared (issue 27: a copy after the comparison, by memcpy, cost a sixth of find). One index serves
// every array (the kept ones are written from `frames` less first_kept), so that a guarded open's read
// back needs no saved registers for pointers of its own.
__attribute__((no_sanitize("address", "thread"))) inline bool on_the_stack(const SiteChain& chain,
                                                                           uintptr_t cfa, void** frames) {
  const char* base = reinterpret_cast<const char*>(cfa - 8);
  const int first_kept = chain.first_kept;
  const int links = chain.links;
  int i = 0;
  for (; i < first_kept; ++i) {
    if (word_at(base, chain.offset[i]) != chain.address[i]) return false;
  }
  for (; i < links; ++i) {
    const uintptr_t word = word_at(base, chain.offset[i]);
    if (word != chain.address[i]) return false;
    frames[i - first_kept] = reinterpret_cast<void*>(word);
  }
  return true;
}

// `chain`'s kept frames written to `frames` if it was recorded at `cfa` for `request` and is on the stack
// now: their count; else -1.
inline int read_back(const SiteChain& chain, uintptr_t cfa, uint32_t request, void** frames) {
  if (chain.cfa != cfa || chain.request != request || !on_the_stack(chain, cfa, frames)) return -1;
  return chain.links > chain.first_kept ? chain.links - chain.first_kept : 0;
}

}  // namespace site_chains_detail

inline int SiteChains::find(uintptr_t cfa, uint32_t request, void** frames) {
  // The chain found (or recorded) last first: a program opens from one place again and again.
  for (unsigned k = 0, i = last_found_; k < kChains; ++k, i = (i + 1) % kChains) {
    const int count = site_chains_detail::read_back(chains_[i], cfa, request, frames);
    if (count >= 0) {
      last_found_ = i;
      return count;
    }
  }
  return -1;
}

inline int SiteChains::find_last(uintptr_t cfa, uint32_t request, void** frames) const {
  return site_chains_detail::read_back(chains_[last_found_], cfa, request, frames);
}

}  // namespace appendguard
