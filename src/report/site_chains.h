// The sites of a thread's guarded opens, remembered so that an open made again from the same place is
// recorded without unwinding (issue 27: unwinding at every open cost about 1,200 instructions).
//
// A chain is what an unwind found above the recording function: each frame's return address and where
// on the stack it was, as an offset from that function's canonical frame address (CFA). When the
// recording function runs again at the same CFA and every one of those stack slots holds the same return
// address again, the stack above it is that chain (each frame's return address sits where its callee's
// frame ends: the same addresses at the same places are the same calls), and the frames the site keeps are
// read back from it. Anything else (another caller, another depth, a frame of another size) is a miss,
// and the caller unwinds. Pure: the stack is read through the given CFA, so tests give it an array.
#pragma once

#include <cstddef>
#include <cstdint>

namespace appendguard {

struct SiteChain {
  // Return addresses checked: this library's frames and libc's above the program's, and the frames
  // kept (24 at most: kOpenFrames).
  static constexpr int kMaxLinks = 56;
  uintptr_t cfa = 0;  // 0: unused
  int max_frames = 0;
  int scope = 0;
  int links = 0;
  int first_kept = 0;               // the kept frames are address[first_kept .. links - 1]
  uint32_t offset[kMaxLinks] = {};  // address[i] is the word at cfa - 8 + offset[i]
  uintptr_t address[kMaxLinks] = {};
};

class SiteChains {
 public:
  static constexpr int kChains = 8;

  // The kept frames of a chain recorded at `cfa` for the same request that is on the stack now, copied
  // into `frames` (at least max_frames of room); -1 if none is. Reads the stack slots of a candidate
  // chain innermost first, and stops at the first that differs.
  int find(uintptr_t cfa, int max_frames, int scope, void** frames) const;

  // Where to record a new chain (it replaces the oldest); not findable until `publish` gives it its CFA,
  // the last thing written.
  SiteChain& start_recording();
  static void publish(SiteChain& chain, uintptr_t cfa) { chain.cfa = cfa; }

 private:
  SiteChain chains_[kChains];
  unsigned next_ = 0;
};

}  // namespace appendguard
