// A table of one atomic pointer per descriptor number (0 to kSlots - 1) that does not reserve its whole
// size at load (issue 24, item 14: two tables of 2^20 slots, 8 MiB each in .bss, kept a program under a
// small `ulimit -v` from starting). The first kInline numbers are in the object (32 KiB for pointers);
// higher ones are in chunks of kChunk slots mapped with mmap when a pointer is first stored there. Reads
// of a number whose chunk is not mapped see null. Lookups of low numbers are one compare and one load,
// as with a flat array. Each group of 64 numbers has a bit set by the first store there (never cleared),
// so that a scan of the table visits only groups that ever held a pointer (issue 27: with 5,000 inherited
// unguarded descriptors below a guarded one, every fork and exec walked 5,000 empty slots).
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

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
    if (std::atomic<T*>* slot = reserve_slot(fd)) return *slot;
    sink_.store(nullptr, std::memory_order_relaxed);
    return sink_;
  }
  // The first number from `fd` on, up to `last`, whose group ever held a pointer (every number of such a
  // group is returned in turn); last + 1 if none. For scans: for (fd = next_used(0, last); fd <= last;
  // fd = next_used(fd + 1, last)).
  int next_used(int fd, int last) const {
    if (fd < 0) fd = 0;
    if (last >= static_cast<int>(kSlots)) last = static_cast<int>(kSlots) - 1;
    while (fd <= last) {
      const unsigned group = static_cast<unsigned>(fd) / kGroup;
      const uint64_t word = used_groups_[group / 64].load(std::memory_order_acquire) >> (group % 64);
      if (word & 1) return fd;
      // Past this group and every unused one after it in this word.
      const unsigned skip = word ? static_cast<unsigned>(__builtin_ctzll(word)) : 64 - group % 64;
      fd = static_cast<int>((group + skip) * kGroup);
    }
    return last + 1;
  }
  // fd's slot, its chunk mapped and its group marked used (for a store that comes later), or null when fd
  // is out of range or no memory can be mapped (operator[] then gives the sink).
  std::atomic<T*>* reserve_slot(int fd) {
    if (static_cast<unsigned>(fd) >= kSlots) return nullptr;
    note_used(static_cast<unsigned>(fd));
    if (static_cast<unsigned>(fd) < kInline) return &low_[fd];
    std::atomic<T*>* chunk = chunk_for(static_cast<unsigned>(fd), true);
    return chunk ? &chunk[(static_cast<unsigned>(fd) - kInline) % kChunk] : nullptr;
  }
  // fd's slot if it may hold a pointer (its chunk is mapped), else null; maps nothing, marks nothing: for
  // a store of null where a pointer may be (a close).
  std::atomic<T*>* existing_slot(int fd) {
    if (__builtin_expect(static_cast<unsigned>(fd) < kInline, 1)) return &low_[fd];
    if (static_cast<unsigned>(fd) >= kSlots) return nullptr;
    std::atomic<T*>* chunk = chunk_for(static_cast<unsigned>(fd), false);
    return chunk ? &chunk[(static_cast<unsigned>(fd) - kInline) % kChunk] : nullptr;
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

  static constexpr unsigned kGroup = 64;
  void note_used(unsigned fd) {
    const unsigned group = fd / kGroup;
    std::atomic<uint64_t>& word = used_groups_[group / 64];
    const uint64_t bit = uint64_t{1} << (group % 64);
    if (!(word.load(std::memory_order_relaxed) & bit)) word.fetch_or(bit, std::memory_order_acq_rel);
  }

  std::atomic<T*> low_[kInline] = {};
  std::atomic<std::atomic<T*>*> chunks_[(kSlots - kInline) / kChunk] = {};
  std::atomic<T*> sink_{nullptr};
  // After the slots: in front of them, it cost the hooks' lookups of low numbers an instruction.
  std::atomic<uint64_t> used_groups_[(kSlots / kGroup + 63) / 64] = {};
};

}  // namespace appendguard
