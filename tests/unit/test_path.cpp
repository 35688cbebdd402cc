#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

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

namespace {

// Paths made of the components that change normalization ("", ".", "..", a leading '.'), of lengths on
// both sides of the 16-byte windows.
std::string random_path(std::mt19937& random, bool absolute) {
  static const char* const kParts[] = {
      "",   ".",    "..",  "mnt", "aofs", "scratch",          ".hidden", "...", "a.b.",
      "x.", "proc", "dev", "fd",  "self", "0123456789abcdef", "s3",      "x"};
  std::string path = absolute ? "/" : "";
  const size_t count = random() % 7;
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) path += '/';
    path += kParts[random() % (sizeof kParts / sizeof kParts[0])];
  }
  if (random() % 8 == 0) path += '/';
  return path;
}

std::string joined(const SplitPath& p) {
  if (p.tail.empty()) return std::string(p.head);
  return (p.head == "/" ? std::string() : std::string(p.head)) + "/" + std::string(p.tail);
}

}  // namespace

TEST_CASE("a split path is what normalize_path makes, without the copy") {
  // Issue 27: an unmatched write open decides on the path as given when it is already normal.
  std::mt19937 random(27);
  size_t split = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::string base = random() % 8 == 0 ? "relative" : random_path(random, true);
    const std::string path = random_path(random, random() % 2 == 0);
    CAPTURE(base, path);
    char out[256];
    const size_t n = normalize_path(base, path, out, sizeof out);
    SplitPath s;
    if (!split_normal_path(base, path, s)) continue;
    ++split;
    REQUIRE(n > 0);
    REQUIRE(joined(s) == std::string(out, n));
    // The prefix test on the split path is the prefix test on the joined one.
    const std::string full(out, n);
    for (const char* prefix : {"/", "/mnt", "/mnt/aofs", "/mnt/aofs/scratch", "/mnt/aofsx", "/x", "/proc",
                               "/dev", "/mnt/aofs/s3/x", "/0123456789abcdef/x"}) {
      const std::string_view p(prefix);
      const bool expected =
          p == "/" || (full.starts_with(p) && (full.size() == p.size() || full[p.size()] == '/'));
      CAPTURE(prefix);
      REQUIRE(split_path_under(s, p) == expected);
    }
    for (size_t at = 0; at < full.size() + 2; ++at) {
      CAPTURE(at);
      REQUIRE(split_path_at(s, at) == (at < full.size() ? full[at] : '\0'));
    }
  }
  CHECK(split > 20000);  // the test says something about paths that are split
}

TEST_CASE("paths normalization would change are not split") {
  SplitPath s;
  CHECK(split_normal_path({}, "/a/b/c.bin", s));
  CHECK((s.head == "/a/b/c.bin" && s.tail.empty()));
  CHECK(split_normal_path("/w", "c.bin", s));
  CHECK((s.head == "/w" && s.tail == "c.bin"));
  CHECK(split_normal_path({}, "/", s));
  CHECK(split_normal_path({}, "/aaaaaaaaaaaaaaaa/bbbbbbbbbbbbbbb/c", s));  // windows overlapping the end
  for (const char* path : {"/a//b", "/a/./b", "/a/../b", "/a/.", "/a/..", "/a/", "//a", "/.h",
                           "/aaaaaaaaaaaaaaaa/bbbbbbbbbbbbbbb/.", "/aaaaaaaaaaaaaaaa/bbbbbbbbbbbbbbbbbbbbb/.",
                           "/aaaaaaaaaaaaaaa//", "", "./a", "../a", ".", "a/", "a//b", "a/./b", "a/../b"}) {
    CAPTURE(path);
    CHECK_FALSE(split_normal_path("/w", path, s));
  }
  CHECK_FALSE(split_normal_path("relative", "a", s));
  CHECK_FALSE(split_normal_path("/w/", "a", s));
  CHECK_FALSE(split_normal_path("/w/../v", "a", s));
}

TEST_CASE("a plainly normal relative path is joined to its base as it is, and every other is refused") {
  // One test for split_normal_path and the working directory's clear cache (shim/guarded_paths.cpp).
  std::mt19937 random(2728);
  size_t plain = 0;
  for (int i = 0; i < 100000; ++i) {
    const std::string path = random_path(random, random() % 8 == 0);
    CAPTURE(path);
    char out[256];
    const size_t n = normalize_path("/w", path, out, sizeof out);
    const bool normal_by_walk =
        !path.empty() && path[0] != '/' && n > 0 && std::string(out, n) == "/w/" + path;
    if (!plainly_normal_relative(path)) {
      // Conservative only for a component starting with '.' (".hidden", "...", a trailing ".").
      if (normal_by_walk) REQUIRE((path[0] == '.' || path.find("/.") != std::string::npos));
      continue;
    }
    ++plain;
    REQUIRE(normal_by_walk);
    SplitPath s;
    REQUIRE(split_normal_path("/w", path, s));
  }
  CHECK(plain > 10000);
  for (const char* path : {"a", "a/b", "a.b/c.d", "x/0123456789abcdef/0123456789abcdef/y", "a b/c"}) {
    CAPTURE(path);
    CHECK(plainly_normal_relative(path));
  }
  for (const char* path :
       {"", "/a", ".", "..", "./a", "../a", ".h", "a/", "a//b", "a/./b", "a/../b", "a/.h", "a/.",
        "x/0123456789abcdef/0123456789abcdef/.h", "x/0123456789abcdef/0123456789abc//y"}) {
    CAPTURE(path);
    CHECK_FALSE(plainly_normal_relative(path));
  }
}

TEST_CASE("the vector test of '/' before '/' or '.' is the byte-by-byte one, at every length and place") {
  // Issue 27: windows of 16 and (with AVX2) 32 pairs, the last one overlapping the end; the buffer ends
  // where the path does, so that a read past it would be seen by the sanitizers.
  auto slowly = [](const std::string& s) {
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      if (s[i] == '/' && (s[i + 1] == '/' || s[i + 1] == '.')) return true;
    }
    return false;
  };
  std::mt19937 random(2727);
  for (size_t n = 0; n <= 140; ++n) {
    for (int round = 0; round < 300; ++round) {
      std::string s(n, 'a');
      // A few '/' and '.' at random places: a pair somewhere, or none.
      const size_t marks = n == 0 ? 0 : random() % 6;
      for (size_t m = 0; m < marks; ++m) s[random() % n] = random() % 2 ? '/' : '.';
      const std::vector<char> exact(s.begin(), s.end());
      CAPTURE(s);
      REQUIRE(has_slash_before_slash_or_dot(exact.data(), exact.size()) == slowly(s));
    }
  }
}

TEST_CASE("the copy of a plainly normal absolute path is the test and memcpy, at every length and place") {
  // Issue 27: a guarded open's path is tested and copied in one pass (32-byte windows with AVX2 from 33
  // bytes, the last one overlapping the end). The source ends where the path does (a read past it would
  // be seen by the sanitizers); the copy must write the path and its NUL, and nothing past them.
  std::mt19937 random(2728);
  for (size_t n = 0; n <= 140; ++n) {
    for (int round = 0; round < 300; ++round) {
      std::string s(n, 'a');
      if (n > 0 && round % 5 != 4) s[0] = '/';  // mostly absolute
      const size_t marks = n == 0 ? 0 : random() % 4;
      for (size_t m = 0; m < marks; ++m) s[random() % n] = random() % 2 ? '/' : '.';
      const std::vector<char> exact(s.begin(), s.end());
      std::vector<char> out(n + 8, '#');
      CAPTURE(s);
      const bool copied = copy_plainly_normal_absolute({exact.data(), exact.size()}, out.data());
      REQUIRE(copied == plainly_normal_absolute(s));
      for (size_t i = n + 1; i < out.size(); ++i) REQUIRE(out[i] == '#');
      if (!copied) continue;
      REQUIRE(std::string(out.data()) == s);
      char normalized[256];
      REQUIRE(normalize_path({}, s, normalized, sizeof normalized) == n);  // left as it is
      REQUIRE(std::string(normalized) == s);
    }
  }
  char out[8] = "#######";
  CHECK(copy_plainly_normal_absolute("/", out));
  CHECK(std::string(out) == "/");
  CHECK_FALSE(copy_plainly_normal_absolute({}, out));
  CHECK_FALSE(copy_plainly_normal_absolute("a/b", out));
}

TEST_CASE("a relative path joined in place to its base is what normalize_path makes, or nothing") {
  // Issue 27: a guarded open of a relative name reads the working directory into the full path's buffer
  // and appends "/" and the name, when normalize_path would make exactly that.
  std::mt19937 random(2729);
  size_t joined = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::string base = random() % 8 == 0 ? "relative" : random_path(random, true);
    const std::string path = random_path(random, random() % 4 == 0);
    CAPTURE(base, path);
    char expected[256];
    const size_t n = normalize_path(base, path, expected, sizeof expected);
    std::vector<char> out(256, '#');
    std::memcpy(out.data(), base.data(), base.size());
    const size_t made = join_plainly_normal(out.data(), base.size(), path, out.size());
    SplitPath s;
    const bool plain = !path.empty() && path[0] != '/' && split_normal_path(base, path, s);
    REQUIRE((made != 0) == plain);
    if (made == 0) continue;
    ++joined;
    REQUIRE(n == made);
    REQUIRE(std::string(out.data()) == std::string(expected, n));
  }
  CHECK(joined > 10000);  // the test says something about paths that are joined
  char small[8] = "/ab";
  CHECK(join_plainly_normal(small, 3, "cdef", sizeof small) == 0);  // "/ab/cdef" and its NUL: 9 bytes
  CHECK(join_plainly_normal(small, 3, "cde", sizeof small) == 7);
  CHECK(std::string(small) == "/ab/cde");
  char root[8] = "/";
  CHECK(join_plainly_normal(root, 1, "x", sizeof root) == 2);
  CHECK(std::string(root) == "/x");
}
