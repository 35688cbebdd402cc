#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <vector>

#include "core/page_pool.h"

using namespace appendguard;

namespace {

// Whether the page at `address` is resident (mincore).
bool resident(const void* address) {
  unsigned char state = 0;
  auto page = reinterpret_cast<uintptr_t>(address) & ~uintptr_t{PagePool::kPageSize - 1};
  REQUIRE(mincore(reinterpret_cast<void*>(page), PagePool::kPageSize, &state) == 0);
  return state & 1;
}

}  // namespace

TEST_CASE("a page pool hands out distinct objects that never straddle a page") {
  PagePool pool(344);
  std::set<char*> seen;
  std::vector<char*> objects;
  for (int i = 0; i < 1000; ++i) {
    auto* p = static_cast<char*>(pool.allocate());
    REQUIRE(p != nullptr);
    CHECK(seen.insert(p).second);
    auto offset = reinterpret_cast<uintptr_t>(p) % PagePool::kPageSize;
    CHECK(offset + 344 <= PagePool::kPageSize);
    std::memset(p, 0xab, 344);
    objects.push_back(p);
  }
  CHECK(pool.objects_in_use() == 1000);
  for (char* p : objects) pool.release(p);
  CHECK(pool.objects_in_use() == 0);
}

TEST_CASE("a page pool gives a page back once every object on it is free, and it reads as zeros") {
  PagePool pool(64);
  std::vector<char*> objects;
  for (int i = 0; i < 64 * 10; ++i) {
    auto* p = static_cast<char*>(pool.allocate());
    REQUIRE(p != nullptr);
    std::memset(p, 0x5a, 64);
    objects.push_back(p);
  }
  const size_t full = pool.resident_pages();
  CHECK(full == 10 + 1);  // ten pages of objects and the slab's bookkeeping page
  // All but one object of each page: nothing goes back (the first kCached given back are kept aside,
  // all from the first page: it stays).
  for (size_t i = 0; i < objects.size(); ++i)
    if (i % 64 != 0) pool.release(objects[i]);
  CHECK(pool.resident_pages() == full);
  for (size_t page = 0; page < 10; ++page) CHECK(resident(objects[page * 64]));
  // The last object of each page: the next kKeepEmpty pages stay, the others are returned.
  for (size_t page = 0; page < 10; ++page) pool.release(objects[page * 64]);
  CHECK(pool.objects_in_use() == 0);
  CHECK(pool.resident_pages() == 1 + 1 + PagePool::kKeepEmpty);
  size_t returned = 0;
  for (size_t page = 0; page < 10; ++page) {
    const char* p = objects[page * 64];
    if (resident(p)) continue;
    ++returned;
    CHECK(p[0] == 0);  // still mapped: a stale reader reads zeros (and faults a zero page in)
    CHECK(p[63] == 0);
  }
  CHECK(returned == 10 - 1 - PagePool::kKeepEmpty);
}

TEST_CASE("a page pool opening and closing one object at a time keeps its page") {
  PagePool pool(128);
  void* first = pool.allocate();
  std::memset(first, 1, 128);
  pool.release(first);
  for (int i = 0; i < 100; ++i) {
    void* p = pool.allocate();
    CHECK(p == first);
    CHECK(static_cast<char*>(p)[0] == 1);  // not returned: what the last object left
    pool.release(p);
  }
  CHECK(resident(first));
}

TEST_CASE("a page pool says whether an object's memory is fresh or holds the object last given back") {
  PagePool pool(1024);  // 4 to a page
  bool fresh = false;
  void* first = pool.allocate(fresh);
  CHECK(fresh);
  pool.release(first);
  CHECK(pool.allocate(fresh) == first);
  CHECK_FALSE(fresh);  // the object given back, kept aside
  std::vector<void*> objects{first};
  for (int i = 0; i < 4 * 8; ++i) {
    objects.push_back(pool.allocate(fresh));
    CHECK(fresh);
  }
  for (void* p : objects) pool.release(p);
  // Past the kept objects and pages, the pages were returned: their memory is fresh again.
  size_t fresh_count = 0;
  for (size_t i = 0; i < objects.size(); ++i) {
    pool.allocate(fresh);
    if (fresh) ++fresh_count;
  }
  CHECK(fresh_count > 0);
  CHECK(fresh_count < objects.size());  // the kept ones were not
}
