#include "core/single_thread.h"

#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "core/file_table.h"
#include "core/lock.h"

using namespace appendguard;

namespace {

// The flag the code reads, for the length of a test (glibc's own is the library's at start-up).
class FlagForTest {
 public:
  explicit FlagForTest(char value) : value_(value) { single_thread::use_flag(&value_); }
  ~FlagForTest() { single_thread::use_flag(nullptr); }
  // What pthread_create does to glibc's flag before the new thread exists.
  void thread_created() { __atomic_store_n(&value_, 0, __ATOMIC_RELAXED); }

 private:
  char value_;
};

constexpr bool kUnlocked = APPENDGUARD_UNLOCKED_WHEN_SINGLE_THREADED;

}  // namespace

TEST_CASE("one thread is what the flag says; no flag (glibc before 2.32) means perhaps several",
          "[single_thread]") {
  CHECK_FALSE(single_thread::process_has_one_thread());  // before start-up, and in this test program
  {
    FlagForTest flag(1);
    CHECK(single_thread::process_has_one_thread() == kUnlocked);  // never under TSan
    flag.thread_created();
    CHECK_FALSE(single_thread::process_has_one_thread());
  }
  single_thread::use_flag(nullptr);
  CHECK_FALSE(single_thread::process_has_one_thread());
}

TEST_CASE("the unlocked compare-exchange and fetch-add give the atomic ones' results", "[single_thread]") {
  std::atomic<uint32_t> word{5};
  uint32_t expected = 4;
  CHECK_FALSE(single_thread::compare_exchange_unlocked(word, expected, 9u));
  CHECK(expected == 5);  // what it found
  CHECK(word.load() == 5);
  CHECK(single_thread::compare_exchange_unlocked(word, expected, 9u));
  CHECK(expected == 5);
  CHECK(word.load() == 9);
  CHECK(single_thread::fetch_add_unlocked(word, ~uint32_t{0}) == 9);  // the unpin's minus one
  CHECK(word.load() == 8);
  std::atomic<uint64_t> wide{uint64_t{1} << 40};
  CHECK(single_thread::fetch_add_unlocked(wide, uint64_t{3}) == uint64_t{1} << 40);
  CHECK(wide.load() == (uint64_t{1} << 40) + 3);
  for (char one : {char{1}, char{0}}) {
    FlagForTest flag(one);
    std::atomic<int> state{0};
    int seen = 1;
    CHECK_FALSE(single_thread::compare_exchange(state, seen, 2));
    CHECK(seen == 0);
    CHECK(single_thread::compare_exchange(state, seen, 2));
    CHECK(single_thread::fetch_add(state, 3) == 2);
    CHECK(state.load() == 5);
  }
}

namespace {

std::atomic<uint64_t> g_counter{0};
volatile sig_atomic_t g_handled = 0;

void add_a_million(int) {
  std::atomic<uint64_t> ignored{0};
  uint64_t expected = 0;
  single_thread::compare_exchange_unlocked(ignored, expected, uint64_t{1});
  single_thread::fetch_add_unlocked(g_counter, uint64_t{1000000});
  g_handled = g_handled + 1;
}

}  // namespace

TEST_CASE("an unlocked read-modify-write is atomic with respect to a signal handler of the same thread",
          "[single_thread]") {
  // A timer signals this thread every 20 us while it adds 1 many times (by xadd, and by a cmpxchg loop
  // as FileTable::pin does); the handler adds 1,000,000. An update lost to a handler that ran between
  // reading and writing the word would show in the sum. (Done with a load and a store instead of the
  // xadd, this check fails: updates are lost within the first thousand signals.)
  struct sigaction action = {}, old = {};
  action.sa_handler = add_a_million;
  sigemptyset(&action.sa_mask);
  REQUIRE(sigaction(SIGUSR2, &action, &old) == 0);
  sigevent event = {};
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = SIGUSR2;
  event._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  timer_t timer;
  REQUIRE(timer_create(CLOCK_MONOTONIC, &event, &timer) == 0);
  itimerspec every = {};
  every.it_interval.tv_nsec = 20000;
  every.it_value.tv_nsec = 20000;
  g_counter.store(0);
  g_handled = 0;
  REQUIRE(timer_settime(timer, 0, &every, nullptr) == 0);
  uint64_t added = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until || g_handled < 2000) {
    for (int i = 0; i < 1000; ++i) {
      single_thread::fetch_add_unlocked(g_counter, uint64_t{1});
      uint64_t seen = g_counter.load(std::memory_order_relaxed);
      while (!single_thread::compare_exchange_unlocked(g_counter, seen, seen + 1)) {
      }
      added += 2;
    }
  }
  itimerspec stop = {};
  REQUIRE(timer_settime(timer, 0, &stop, nullptr) == 0);
  timer_delete(timer);
  sigaction(SIGUSR2, &old, nullptr);
  const uint64_t handled = static_cast<uint64_t>(g_handled);
  CAPTURE(handled, added);
  CHECK(handled >= 2000);
  CHECK(g_counter.load() == added + handled * 1000000);
}

TEST_CASE("a lock taken with one thread and released after a thread was created wakes that thread",
          "[single_thread]") {
  // The hazard of taking it without the lock prefix: a thread created while it is held (the library's
  // own committer thread, or the program's) waits for it, so its release must wake that thread.
  FlagForTest flag(1);
  Lock lock;
  lock.lock();  // unlocked: the process has one thread
  flag.thread_created();
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    lock.lock();
    acquired.store(true);
    lock.unlock();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the waiter is waiting (futex) by now
  CHECK_FALSE(acquired.load());
  lock.unlock();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!acquired.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  if (!acquired.load()) {
    waiter.detach();  // asleep for good: the release did not wake it
    FAIL("the thread waiting for the lock was not woken by its release");
  }
  waiter.join();
  lock.lock();  // and free again
  lock.unlock();
}

TEST_CASE("a lock taken and released with one thread, then shared by threads, excludes as before",
          "[single_thread]") {
  FlagForTest flag(1);
  Lock lock;
  uint64_t shared = 0;
  for (int i = 0; i < 1000; ++i) {
    lock.lock();
    ++shared;
    lock.unlock();
  }
  flag.thread_created();
  auto add = [&] {
    for (int i = 0; i < 100000; ++i) {
      lock.lock();
      ++shared;
      lock.unlock();
    }
  };
  std::thread a(add), b(add);
  a.join();
  b.join();
  CHECK(shared == 201000);
}

namespace {

OpenRecord record_of(const char* path, ino_t inode) {
  OpenRecord r;
  r.path = path;
  r.device = 1;
  r.inode = inode;
  r.kernel_appends = true;
  return r;
}

}  // namespace

TEST_CASE(
    "pin and unpin with one thread: a pinned description is recycled by its unpin, a recycled one "
    "cannot be pinned",
    "[single_thread]") {
  for (char one : {char{1}, char{0}}) {
    FlagForTest flag(one);
    auto table = std::make_unique<FileTable>();
    Description* d = table->track(3, record_of("/a", 7));
    REQUIRE(d != nullptr);
    REQUIRE(table->pin(d));
    REQUIRE(table->pin(d));
    CHECK(d->refs.load() == 3);  // the table's and two calls'
    CHECK(table->forget(3));     // pinned: recycled by the last unpin, not by forget
    CHECK(d->refs.load() == 2);
    table->unpin(d);
    CHECK(d->refs.load() == 1);
    CHECK(d->file != nullptr);
    table->unpin(d);  // the last reference: recycled now
    CHECK(d->refs.load() == 0);
    CHECK_FALSE(table->pin(d));
    CHECK(table->descriptions_in_use() == 0);
  }
}
