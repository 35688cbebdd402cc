#include "core/page_pool.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace appendguard {

constinit SystemCallFunction pool_system_call = &syscall;

void* map_memory(size_t size) {
  long result =
      pool_system_call(SYS_mmap, nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return result == -1 ? nullptr : reinterpret_cast<void*>(result);
}

void unmap_memory(void* address, size_t size) {
  if (address && size) pool_system_call(SYS_munmap, address, size);
}

bool PagePool::add_slab() {
  // Twice the size, then the ends cut off, for a slab aligned to its size: an object's slab (and its
  // bookkeeping, on the slab's first page) is then its address with the low bits cleared.
  auto* mapped = static_cast<char*>(map_memory(2 * kSlabSize));
  if (!mapped) return false;
  const uintptr_t start = reinterpret_cast<uintptr_t>(mapped);
  const uintptr_t aligned = (start + kSlabSize - 1) & ~uintptr_t{kSlabSize - 1};
  unmap_memory(mapped, aligned - start);
  unmap_memory(reinterpret_cast<char*>(aligned + kSlabSize), start + kSlabSize - aligned);
  auto* slab = reinterpret_cast<char*>(aligned);
  auto* pages = reinterpret_cast<Page*>(slab);
  const uint64_t all_free = per_page_ == 64 ? ~uint64_t{0} : (uint64_t{1} << per_page_) - 1;
  ++resident_;                                 // the bookkeeping page
  for (size_t i = kSlabPages - 1; i-- > 0;) {  // listed last first: the slab is used from its start
    Page* page = &pages[i];
    page->memory = slab + (i + 1) * kPageSize;
    page->free_mask = all_free;
    page->constructed_mask = 0;
    page->used = 0;
    page->state = State::kReturned;
    page->listed = false;
    list(page);
  }
  return true;
}

PagePool::Page* PagePool::page_of(void* object) const {
  const uintptr_t address = reinterpret_cast<uintptr_t>(object);
  const uintptr_t slab = address & ~uintptr_t{kSlabSize - 1};
  return reinterpret_cast<Page*>(slab) + ((address - slab) / kPageSize - 1);
}

void PagePool::list(Page* page) {
  page->prev = nullptr;
  page->next = available_;
  if (available_) available_->prev = page;
  available_ = page;
  page->listed = true;
}

void PagePool::unlist(Page* page) {
  if (page->prev)
    page->prev->next = page->next;
  else
    available_ = page->next;
  if (page->next) page->next->prev = page->prev;
  page->listed = false;
}

void* PagePool::allocate_from_pages(bool& fresh) {
  if (!available_ && !add_slab()) {
    --in_use_;
    return nullptr;
  }
  Page* page = available_;
  const unsigned slot = static_cast<unsigned>(__builtin_ctzll(page->free_mask));
  page->free_mask &= page->free_mask - 1;
  fresh = !(page->constructed_mask & (uint64_t{1} << slot));
  page->constructed_mask |= uint64_t{1} << slot;
  ++page->used;
  if (page->free_mask == 0) unlist(page);
  if (page->state == State::kKeptEmpty) --kept_empty_;
  if (page->state == State::kReturned) ++resident_;
  page->state = State::kInUse;
  return page->memory + slot * object_size_;
}

void PagePool::release_to_page(void* object) {
  Page* page = page_of(object);
  const unsigned slot = static_cast<unsigned>((static_cast<char*>(object) - page->memory) / object_size_);
  page->free_mask |= uint64_t{1} << slot;
  --page->used;
  if (!page->listed) list(page);
  if (page->used != 0) return;
  if (kept_empty_ < kKeepEmpty) {
    page->state = State::kKeptEmpty;
    ++kept_empty_;
    return;
  }
  // Every object on it is free: its memory goes back; the page reads as zeros until used again.
  pool_system_call(SYS_madvise, page->memory, kPageSize, MADV_DONTNEED);
  page->constructed_mask = 0;
  page->state = State::kReturned;
  --resident_;
}

}  // namespace appendguard
