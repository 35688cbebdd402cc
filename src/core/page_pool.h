// Objects of one size in pages of their own, taken and given back under the caller's lock, and a page
// returned to the kernel (madvise MADV_DONTNEED) once every object on it is free (issue 27: the memory
// of 10,000 closed files stayed with the process). The page stays mapped: a reader holding a stale
// pointer reads zeros, never faults. Pages come in slabs of 64 (256 KiB, aligned to their size), whose
// first page holds what the pool knows of the others, so that no bookkeeping sits in memory that may be
// returned. The last few objects given back are kept aside (kCached, handed out first, without touching
// the pages' bookkeeping) and a few empty pages are kept (kKeepEmpty), so that a program opening and
// closing one file at a time neither faults a page in and gives it back at every open nor pays for the
// bookkeeping each time.
//
// Memory is mapped and returned through pool_system_call (libc's syscall(): async-signal-safe, unlike
// malloc, since a signal handler may open or close a tracked file).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/hidden.h"

namespace appendguard {

// The system call function the pools (and the file table's signal masks) use; libc's syscall() by
// default, set to the real one by the shim at start-up (FileTable::use_system_call).
using SystemCallFunction = long (*)(long, ...);
extern APPENDGUARD_HIDDEN constinit SystemCallFunction pool_system_call;
// Anonymous memory of `size` bytes (zeros) through pool_system_call, or null; and its unmapping.
void* map_memory(size_t size);
void unmap_memory(void* address, size_t size);

class PagePool {
 public:
  static constexpr size_t kPageSize = 4096;
  static constexpr size_t kSlabPages = 64;
  static constexpr size_t kSlabSize = kPageSize * kSlabPages;
  static constexpr size_t kKeepEmpty = 2;
  static constexpr size_t kCached = 4;

  // `object_size`: at least 64 (a page holds at most 64 objects, one bit each), at most a page.
  constexpr explicit PagePool(size_t object_size)
      : object_size_(object_size), per_page_(static_cast<unsigned>(kPageSize / object_size)) {}
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // An object's memory (zeros if its page is new or was returned; otherwise what the last object there
  // left), or null when no memory can be mapped.
  // `fresh`: whether the memory never held an object since it was mapped or last returned (zeros: the
  // caller constructs one there); otherwise it holds the object last given back, which the caller reuses
  // as it is (a reader racing its recycle may still read it: its atomic fields must not be re-initialized
  // with plain stores).
  void* allocate(bool& fresh) {
    ++in_use_;
    if (cached_) {
      fresh = false;
      return cache_[--cached_];
    }
    return allocate_from_pages(fresh);
  }
  void* allocate() {
    bool fresh;
    return allocate(fresh);
  }
  // Gives `object` (from allocate()) back; its page is returned once every object on it is free.
  void release(void* object) {
    --in_use_;
    if (cached_ < kCached) {
      cache_[cached_++] = object;
      return;
    }
    release_to_page(object);
  }

  size_t object_size() const { return object_size_; }
  size_t objects_in_use() const { return in_use_; }
  // Pages with an object in use or kept empty: the pool's share of the resident memory, at most.
  size_t resident_pages() const { return resident_; }

 private:
  enum class State : uint8_t { kReturned, kInUse, kKeptEmpty };  // kReturned: never touched, or returned
  struct Page {
    char* memory;
    Page* next;  // in available_ (pages with a free object)
    Page* prev;
    uint64_t free_mask;         // bit i: object i is free
    uint64_t constructed_mask;  // bit i: object i was handed out since the page was last returned
    uint16_t used;
    State state;
    bool listed;
  };
  static_assert(sizeof(Page) * (kSlabPages - 1) <= kPageSize);

  void* allocate_from_pages(bool& fresh);
  void release_to_page(void* object);
  bool add_slab();
  Page* page_of(void* object) const;
  void list(Page* page);
  void unlist(Page* page);

  size_t object_size_;
  unsigned per_page_;
  Page* available_ = nullptr;
  size_t in_use_ = 0;
  void* cache_[kCached] = {};
  size_t cached_ = 0;
  size_t resident_ = 0;
  size_t kept_empty_ = 0;
};

}  // namespace appendguard
