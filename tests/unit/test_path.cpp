#include <catch2/catch.hpp>

#include <string>

#include "core/path.h"

using namespace appendguard;

static std::string norm(const char* base, const char* path) {
  char out[64];
  size_t n = normalize_path(base, path, out, sizeof out);
  return n ? std::string(out, n) : std::string("<none>");
}

TEST_CASE("normalize") {
  CHECK(norm("/work", "a.bin") == "/work/a.bin");
  CHECK(norm("/work/", "./a.bin") == "/work/a.bin");
  CHECK(norm("/work", "../x//y/./z") == "/x/y/z");
  CHECK(norm("/", "..") == "/");
  CHECK(norm("/a/b", "/c/../d") == "/d");
  CHECK(norm("/a", "") == "/a");
  CHECK(norm("relative", "x") == "<none>");
  CHECK(norm("", "/abs") == "/abs");
}

TEST_CASE("normalize refuses what does not fit") {
  char out[8];
  CHECK(normalize_path("/", "/abcdefghij", out, sizeof out) == 0);
  CHECK(normalize_path("/", "/abc", out, sizeof out) == 4);
}
