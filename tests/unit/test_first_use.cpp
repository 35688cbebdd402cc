#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "core/first_use.h"

using appendguard::FirstUse;

TEST_CASE("FirstUse does nothing until armed, then its work once") {
  FirstUse first;
  int runs = 0;
  REQUIRE_FALSE(first.pending());
  first.run([&] { ++runs; });
  REQUIRE(runs == 0);
  first.arm();
  REQUIRE(first.pending());
  first.run([&] { ++runs; });
  first.run([&] { ++runs; });
  REQUIRE(runs == 1);
  REQUIRE_FALSE(first.pending());
}

TEST_CASE("FirstUse: threads asking together see the work done once, and done when they return") {
  for (int round = 0; round < 50; ++round) {
    FirstUse first;
    first.arm();
    std::atomic<int> runs{0};
    std::atomic<bool> finished{false};
    std::atomic<int> saw_unfinished{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        first.run([&] {
          runs.fetch_add(1);
          std::this_thread::yield();
          finished.store(true);
        });
        if (!finished.load()) saw_unfinished.fetch_add(1);
      });
    }
    for (std::thread& thread : threads) thread.join();
    REQUIRE(runs.load() == 1);
    REQUIRE(saw_unfinished.load() == 0);
  }
}

TEST_CASE("FirstUse after a fork: a run left unfinished by another thread is pending again") {
  FirstUse first;
  first.arm();
  std::atomic<bool> inside{false};
  std::atomic<bool> release{false};
  std::thread runner([&] {
    first.run([&] {
      inside.store(true);
      while (!release.load()) std::this_thread::yield();
    });
  });
  while (!inside.load()) std::this_thread::yield();
  first.reset_after_fork();  // as the fork child's handler would, while the run is under way
  REQUIRE(first.pending());
  int runs = 0;
  first.run([&] { ++runs; });  // the child's own first use
  REQUIRE(runs == 1);
  release.store(true);
  runner.join();
  REQUIRE_FALSE(first.pending());
  first.reset_after_fork();  // nothing under way: stays done
  REQUIRE_FALSE(first.pending());
}
