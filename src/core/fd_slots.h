// A table of one atomic pointer per descriptor number (0 to kSlots - 1) that does not reserve its whole
// size at load (issue 24, item 14: two tables of 2^20 slots, 8 MiB each in .bss, kept a program under a
// small `ulimit -v` from starting). The first kInline numbers are in the object (32 KiB for pointers);
// higher ones are in chunks of kChunk slots mapped with mmap when a pointer is first stored there. Reads
// of a number whose chunk is not mapped see null. Lookups of low numbers are one compare and one load,
// as with a flat array.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstddef>

namespace appendguard {

template <typename T, unsigned kSlots>
class FdSlots {
 public:
  static constexpr unsigned kInline = 4096;
  static constexpr unsigned kChunk = 4096;
  static_assert(kSlots > kInline && (kSlots - kInline) % kChunk == 0);

  [[gnu::always_inline]] T* load(int fd, std::memory_order order) const {
    if (__builtin_expect(static_cast<unsigned>(fd) < kInline, 1)) return low_[fd].load(order);
    // Inline, without a call: a call on the cold side makes the hooks save registers on their hot side.
    if (static_cast<unsigned>(fd) >= kSlots) return nullptr;
    const unsigned high = static_cast<unsigned>(fd) - kInline;
    std::atomic<T*>* chunk = chunks_[high / kChunk].load(std::memory_order_acquire);
    return chunk ? chunk[high % kChunk].load(order) : nullptr;
  }
  // The same with the high numbers out of line: small enough for callers that must stay inlined.
  [[gnu::always_inline]] T* load_small(int fd, std::memory_order order) const {
    if (__builtin_expect(static_cast<unsigned>(fd) < kInline, 1)) return low_[fd].load(order);
    return load_high(fd, order);
  }
  [[gnu::noinline]] T* load_high(int fd, std::memory_order order) const { return load(fd, order); }
  // The slot of `fd` (0 <= fd < kSlots), its chunk mapped if needed: a store there is seen by load. If no
  // memory can be mapped, a slot of no descriptor (what is stored there is never read back as fd's).
  std::atomic<T*>& operator[](int fd) {
    if (static_cast<unsigned>(fd) < kInline) return low_[fd];
    std::atomic<T*>* chunk = chunk_for(static_cast<unsigned>(fd), true);
    if (!chunk) {
      sink_.store(nullptr, std::memory_order_relaxed);
      return sink_;
    }
    return chunk[(static_cast<unsigned>(fd) - kInline) % kChunk];
  }
  // Whether a pointer stored at `fd` would be kept (its chunk is mapped, or can be).
  bool reserve(int fd) {
    return static_cast<unsigned>(fd) < kInline ||
           (static_cast<unsigned>(fd) < kSlots && chunk_for(static_cast<unsigned>(fd), true));
  }

 private:
  std::atomic<T*>* chunk_for(unsigned fd, bool map) {
    std::atomic<std::atomic<T*>*>& entry = chunks_[(fd - kInline) / kChunk];
    std::atomic<T*>* chunk = entry.load(std::memory_order_acquire);
    if (chunk || !map) return chunk;
    void* p = mmap(nullptr, kChunk * sizeof(std::atomic<T*>), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);  // zero pages: every slot null
    if (p == MAP_FAILED) return nullptr;
    auto* mapped = static_cast<std::atomic<T*>*>(p);
    if (!entry.compare_exchange_strong(chunk, mapped, std::memory_order_acq_rel)) {
      munmap(p, kChunk * sizeof(std::atomic<T*>));  // another thread mapped it first
      return chunk;
    }
    return mapped;
  }

  std::atomic<T*> low_[kInline] = {};
  std::atomic<std::atomic<T*>*> chunks_[(kSlots - kInline) / kChunk] = {};
  std::atomic<T*> sink_{nullptr};
};

}  // namespace appendguard
