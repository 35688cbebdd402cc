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

TEST_CASE("an absolute path already normal is copied as it is, the same as the component walk gives") {
  // A relative path always takes the component walk: "/" joined with the path less its '/' is the
  // reference for the absolute path's shortcut (issue 27).
  for (const char* path :
       {"/", "/a", "/a/b.safetensors", "/.hidden/x", "/a/..b/c.", "/a/b..", "/a/./b", "/a/../b", "/a/", "//a",
        "/a//b", "/a/.", "/a/..", "/.", "/..", "/a/b/...", "/a/.../b", "/ab/.c/d"}) {
    CAPTURE(path);
    CHECK(norm("", path) == norm("/", path + 1));
  }
  CHECK(norm("", "/a/b.safetensors") == "/a/b.safetensors");
  CHECK(norm("", "/a/../b") == "/b");
  CHECK(norm("", "/a/") == "/a");
  CHECK(norm("", "/a/.") == "/a");
  // A base directory already normal is copied too.
  for (const char* base : {"/", "/w", "/w/x", "/w/./x", "/w/../x", "/w/", "//w"}) {
    for (const char* path : {"a", "./a", "../a", "a/../../b", "", "."}) {
      CAPTURE(base, path);
      CHECK(norm(base, path) == norm("/", (std::string(base) + "/" + path).c_str() + 1));
    }
  }
}
