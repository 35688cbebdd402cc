#include "core/write_all.h"

#include <errno.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace appendguard;

namespace {

// A writer that takes at most `chunk` bytes per call and plays a script of failures first.
struct ScriptedWriter {
  std::vector<int> failures;  // errno values returned (as -1) before any progress; 0: a call writing 0
  size_t chunk = 3;
  std::string sink;
  size_t calls = 0;

  ssize_t operator()(const std::string& data, uint64_t done, uint64_t left) {
    ++calls;
    if (!failures.empty()) {
      int e = failures.front();
      failures.erase(failures.begin());
      if (e == 0) return 0;
      errno = e;
      return -1;
    }
    size_t n = left < chunk ? left : chunk;
    sink.append(data, done, n);
    return static_cast<ssize_t>(n);
  }
};

}  // namespace

TEST_CASE("write_all continues short writes and retries EINTR") {
  const std::string data = "0123456789";
  ScriptedWriter w{{EINTR, EINTR}, 3, {}, 0};
  WriteAllResult r =
      write_all(data.size(), [&](uint64_t done, uint64_t left) { return w(data, done, left); });
  CHECK(r.complete);
  CHECK(r.written == 10);
  CHECK(r.error_or_eio() == 0);
  CHECK(w.sink == data);
  CHECK(w.calls == 2 + 4);
}

TEST_CASE("write_all stops at the first error and says how much was written") {
  const std::string data = "0123456789";
  ScriptedWriter w{{}, 4, {}, 0};
  int calls = 0;
  WriteAllResult r = write_all(data.size(), [&](uint64_t done, uint64_t left) -> ssize_t {
    if (++calls == 2) {
      errno = ENOSPC;
      return -1;
    }
    return w(data, done, left);
  });
  CHECK_FALSE(r.complete);
  CHECK(r.written == 4);
  CHECK(r.error == ENOSPC);
  CHECK(r.error_or_eio() == ENOSPC);
  errno = 0;
  CHECK(r.as_write_result() == 4);  // bytes were written: write(2) reports them, not the error
}

TEST_CASE("write_all treats a call that writes nothing as the end, EIO for callers that need an error") {
  const std::string data = "abc";
  ScriptedWriter w{{0}, 3, {}, 0};
  WriteAllResult r =
      write_all(data.size(), [&](uint64_t done, uint64_t left) { return w(data, done, left); });
  CHECK_FALSE(r.complete);
  CHECK(r.written == 0);
  CHECK(r.error == 0);
  CHECK(r.error_or_eio() == EIO);
  CHECK(r.as_write_result() == 0);
}

TEST_CASE("write_all's write(2)-style result is -1 with errno when nothing was written") {
  WriteAllResult r = write_all(5, [](uint64_t, uint64_t) -> ssize_t {
    errno = EBADF;
    return -1;
  });
  errno = 0;
  CHECK(r.as_write_result() == -1);
  CHECK(errno == EBADF);
}

TEST_CASE("write_all of nothing makes no call") {
  int calls = 0;
  WriteAllResult r = write_all(0, [&](uint64_t, uint64_t) -> ssize_t { return ++calls; });
  CHECK(r.complete);
  CHECK(calls == 0);
}
