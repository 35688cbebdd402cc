#include "core/thread_id_cache.h"

#include <catch2/catch.hpp>

using appendguard::ThreadIdCache;

TEST_CASE("ThreadIdCache asks once per process and again after forget", "[thread_id_cache]") {
  ThreadIdCache cache;
  int asked = 0;
  pid_t kernel_tid = 101;
  auto ask = [&] {
    ++asked;
    return kernel_tid;
  };
  CHECK(cache.get(50, ask) == 101);
  CHECK(cache.get(50, ask) == 101);
  CHECK(asked == 1);
  // A fork child: another pid, another thread id.
  kernel_tid = 202;
  CHECK(cache.get(60, ask) == 202);
  CHECK(asked == 2);
  CHECK(cache.get(60, ask) == 202);
  CHECK(asked == 2);
  // Forgotten at fork: even the same pid (reused by a descendant) asks again.
  cache.forget();
  kernel_tid = 303;
  CHECK(cache.get(60, ask) == 303);
  CHECK(asked == 3);
}

TEST_CASE("ThreadIdCache: an ask interrupted by another (a signal handler) leaves a valid id",
          "[thread_id_cache]") {
  ThreadIdCache cache;
  // The handler runs inside the first ask (as if it interrupted it) and fills the cache itself.
  auto outer = [&] {
    CHECK(cache.get(7, [] { return pid_t{77}; }) == 77);
    return pid_t{77};
  };
  CHECK(cache.get(7, outer) == 77);
  CHECK(cache.pid == 7);
  CHECK(cache.tid == 77);
}
