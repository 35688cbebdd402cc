#include <catch2/catch.hpp>

#include <string>

#include "core/glob.h"

using namespace appendguard;

TEST_CASE("file-name patterns") {
  CHECK(glob_match("*.safetensors", "model.safetensors"));
  CHECK(glob_match("*.safetensors", ".safetensors"));
  CHECK_FALSE(glob_match("*.safetensors", "model.safetensors.tmp"));
  CHECK(glob_match("model-\?\?\?\?\?-of-*.safetensors", "model-00001-of-00004.safetensors"));
  CHECK_FALSE(glob_match("model-\?\?\?\?\?-of-*.safetensors", "model-0001-of-00004.safetensors"));
  CHECK(glob_match("[abc]x", "bx"));
  CHECK_FALSE(glob_match("[abc]x", "dx"));
  CHECK(glob_match("[!abc]x", "dx"));
  CHECK(glob_match("[^abc]x", "dx"));
  CHECK(glob_match("[a-c]x", "cx"));
  CHECK(glob_match("[]]x", "]x"));
  CHECK(glob_match("\\*x", "*x"));
  CHECK_FALSE(glob_match("\\*x", "ax"));
  CHECK(glob_match("*", ""));
  CHECK_FALSE(glob_match("?", ""));
}

TEST_CASE("path patterns: * stays in a component, ** crosses") {
  CHECK(glob_match("/mnt/hdfs/*.bin", "/mnt/hdfs/a.bin"));
  CHECK_FALSE(glob_match("/mnt/hdfs/*.bin", "/mnt/hdfs/sub/a.bin"));
  CHECK(glob_match("/mnt/hdfs/**", "/mnt/hdfs/sub/a.bin"));
  CHECK(glob_match("/mnt/**/a.bin", "/mnt/a.bin"));
  CHECK(glob_match("/mnt/**/a.bin", "/mnt/x/y/a.bin"));
  CHECK_FALSE(glob_match("/mnt/**/a.bin", "/mnt/x/y/b.bin"));
  CHECK(glob_match("**/ckpt/*.pt", "/home/u/ckpt/x.pt"));
  CHECK_FALSE(glob_match("/mnt/?", "/mnt//"));
  CHECK_FALSE(glob_match("/a[/]b", "/a/b"));
}

TEST_CASE("validation") {
  CHECK(validate_glob("*.safetensors").empty());
  CHECK(validate_glob("/abs/**").empty());
  CHECK(validate_glob("**/x/*").empty());
  CHECK_FALSE(validate_glob("").empty());
  CHECK_FALSE(validate_glob("[abc").empty());
  CHECK_FALSE(validate_glob("x\\").empty());
  CHECK_FALSE(validate_glob("rel/x").empty());
}

TEST_CASE("pattern sets") {
  PatternSet set;
  REQUIRE(set.compile("*.safetensors:/data/**/*.bin").empty());
  CHECK(set.needs_full_path());
  CHECK(set.matches("/tmp/a.safetensors", "a.safetensors"));
  CHECK(set.matches("/data/x/y.bin", "y.bin"));
  CHECK_FALSE(set.matches("/tmp/y.bin", "y.bin"));
  PatternSet names;
  REQUIRE(names.compile("*.safetensors").empty());
  CHECK_FALSE(names.needs_full_path());
  CHECK(names.matches({}, "x.safetensors"));
  CHECK_FALSE(set.compile("a:[b").empty());
  CHECK(file_name_of("/a/b/c.txt") == "c.txt");
  CHECK(file_name_of("c.txt") == "c.txt");
}

TEST_CASE("suffix fast path keeps escaped and bracketed patterns exact") {
  PatternSet set;
  REQUIRE(set.compile("a\\*b:[xy]z:*").empty());
  CHECK(set.matches({}, "a*b"));
  CHECK(set.matches({}, "yz"));
  CHECK(set.matches({}, "anything"));
}

TEST_CASE("could_match rejects by the literal suffix, conservatively") {
  PatternSet set;
  REQUIRE(set.compile("*.safetensors:/data/**/*.bin").empty());
  CHECK(set.could_match("model.safetensors"));
  CHECK(set.could_match("../x/y.bin"));
  CHECK_FALSE(set.could_match("/tmp/x.txt"));
  CHECK_FALSE(set.could_match("x.safetensors.tmp"));
  CHECK(set.could_match("odd/."));  // normalization could change the ending
  CHECK(set.could_match("dir/"));
  PatternSet any;
  REQUIRE(any.compile("/data/**").empty());
  CHECK(any.could_match("/anything"));  // no literal suffix: cannot reject
  // A relative name shorter than a suffix with '/': joined to its directory it may end with it.
  PatternSet named;
  REQUIRE(named.compile("/data/**/ckpt.bin").empty());
  CHECK(named.could_match("ckpt.bin"));  // from /data/run: /data/run/ckpt.bin
  CHECK(named.could_match("run/ckpt.bin"));
  CHECK(named.could_match("/ckpt.bin"));
  CHECK_FALSE(named.could_match("/kpt.bin"));  // absolute: it is what it is
  CHECK_FALSE(named.could_match("pt.bin"));    // ".../pt.bin" never ends with "/ckpt.bin"
  CHECK_FALSE(named.could_match("xckpt.bin"));
  CHECK_FALSE(named.could_match("ckpt.bim"));
}

TEST_CASE("name_match says kYes only where matches_path is true, kNo where could_match is false") {
  PatternSet set;
  REQUIRE(set.compile("*.safetensors:/data/**/*.bin").empty());
  CHECK(set.name_match("/tmp/model.safetensors") == NameMatch::kYes);  // "*.ext": its suffix decides
  CHECK(set.name_match("model.safetensors") == NameMatch::kYes);
  CHECK(set.name_match("/data/run/x.bin") == NameMatch::kMaybe);  // a pattern with '/': the path decides
  CHECK(set.name_match("/tmp/x.bin") == NameMatch::kMaybe);
  CHECK(set.name_match("/tmp/x.txt") == NameMatch::kNo);
  CHECK(set.name_match("/tmp/dir/") == NameMatch::kMaybe);  // normalization could change the ending
  CHECK(set.name_match("/tmp/x.safetensors/.") == NameMatch::kMaybe);
  PatternSet bracket;
  REQUIRE(bracket.compile("*.pt[h]").empty());
  CHECK(bracket.name_match("/tmp/x.pth") == NameMatch::kMaybe);  // a bracket: not a plain suffix
  // The first pattern whose suffix ends the path says: a later "*.ext" one is not looked at (kMaybe is
  // always safe).
  PatternSet suffix_after;
  REQUIRE(suffix_after.compile("/data/**/*.bin:*.bin").empty());
  CHECK(suffix_after.name_match("/tmp/x.bin") == NameMatch::kMaybe);
  for (const char* path : {"/tmp/model.safetensors", "/a/.safetensors", "/x/y.bin", "/x.txt",
                           "rel/model.safetensors", "/data/q/x.bin", "/tmp/a.safetensors.tmp"}) {
    INFO(path);
    const NameMatch verdict = set.name_match(path);
    if (verdict == NameMatch::kYes) CHECK(set.matches_path(path));
    CHECK((verdict != NameMatch::kNo) == set.could_match(path));
    if (verdict == NameMatch::kNo) CHECK_FALSE(set.matches_path(path));
  }
}

TEST_CASE("matching never backtracks: steps bounded by pattern times text, whatever the stars") {
  // Issue 13: the recursive matcher took over 30 s on this pair (exponential in the stars).
  const std::string pattern = "*a*a*a*a*a*a*a*a*b*c";
  const std::string name(61, 'a');
  size_t steps = 0;
  CHECK_FALSE(glob_match(pattern, name, steps));
  CHECK(steps <= 2 * (pattern.size() + 1) * (name.size() + 1));
  steps = 0;
  CHECK(glob_match(pattern, name + "bc", steps));
  CHECK(steps <= 2 * (pattern.size() + 1) * (name.size() + 3));
  // The same through '**' and across components.
  const std::string deep = "/**/a**a**a**a**a**a**a**b**c";
  std::string path;
  for (int i = 0; i < 30; ++i) path += "/aa";
  steps = 0;
  CHECK_FALSE(glob_match(deep, path, steps));
  CHECK(steps <= 2 * (deep.size() + 1) * (path.size() + 1));
  CHECK(glob_match(deep, path + "/bc"));
  // '*' stays in its component even when that forces a different split.
  CHECK(glob_match("/x/*a*/b", "/x/zaz/b"));
  CHECK_FALSE(glob_match("/x/*a*/b", "/x/z/a/b"));
  CHECK(glob_match("/x/**a*/b", "/x/z/a/b"));
  CHECK(glob_match("/a/**/**/b", "/a/b"));
  CHECK(glob_match("***", "a/b"));
  // Found by fuzz_glob: "**/" skips zero directories only where it starts, never after consuming text.
  CHECK_FALSE(glob_match("**/ckpt/[!x]*\\*.pt", "/home/u-ckpt/a*.pt"));
  CHECK(glob_match("**/ckpt/[!x]*\\*.pt", "/home/u/ckpt/a*.pt"));
  CHECK_FALSE(glob_match("/a/**/b", "/a/xb"));
  CHECK(glob_match("/a/**/b", "/a/x/b"));
  CHECK_FALSE(glob_match("[ab", "a"));
}

TEST_CASE("a long pattern (beyond the stack rows) matches the same") {
  std::string pattern(300, '?');
  CHECK(glob_match(pattern, std::string(300, 'x')));
  CHECK_FALSE(glob_match(pattern, std::string(299, 'x')));
  CHECK(glob_match(pattern + "*", std::string(400, 'x')));
}

TEST_CASE("a pattern through a symlinked directory also matches the directory's physical name") {
  // Issue 24, item 17: "/data/lnk/**" with lnk -> real guarded /data/lnk/f but not the same file opened
  // relative to a working directory inside lnk or with openat on it (named /data/real/f by the kernel).
  PatternSet set;
  REQUIRE(set.compile("/data/lnk/**:/data/lnk/run-*/*.bin:*.safetensors:/plain/**").empty());
  CHECK_FALSE(set.matches("/data/real/f", "f"));
  size_t added = set.add_physical_aliases([](const std::string& directory, std::string& out) {
    if (directory.rfind("/data/lnk", 0) != 0) {
      out = directory;  // no symlink: the same name
      return true;
    }
    out = "/data/real" + directory.substr(9);
    return true;
  });
  CHECK(added == 2);
  CHECK(set.size() == 6);
  CHECK(set.matches("/data/real/f", "f"));
  CHECK(set.matches("/data/lnk/f", "f"));
  CHECK(set.matches("/data/real/run-3/x.bin", "x.bin"));
  CHECK_FALSE(set.matches("/plainer/f", "f"));
  CHECK(set.add_physical_aliases([](const std::string&, std::string& out) {
    out = "/data/real";
    return true;
  }) <= 2);  // an alias already known is not added again
  PatternSet missing;
  REQUIRE(missing.compile("/gone/**").empty());
  CHECK(missing.add_physical_aliases([](const std::string&, std::string&) { return false; }) == 0);
}

TEST_CASE("a '*.ext' pattern is compiled into a suffix test that matches as the glob does") {
  // Issue 27: matching *.safetensors ran the automaton at every guarded open.
  for (const char* pattern : {"*.safetensors", "*", "*x", "*.distcp"}) {
    PatternSet set;
    REQUIRE(set.compile(pattern).empty());
    for (const char* name : {"model.safetensors", ".safetensors", "a.safetensors.tmp", "", "x", "ax",
                             "a.distcp", "safetensors", "m.Safetensors"}) {
      CHECK(set.matches({}, name) == glob_match(pattern, name));
    }
  }
}

TEST_CASE("the literal suffix test by words says what a comparison of the ending says") {
  // Issue 27: the last 8 bytes of the suffix are compared as one word. Suffixes of every length from 0 to
  // 12, names shorter and longer than 8 bytes, differing at each end.
  // Issue 27 again: a suffix of 9 to 16 bytes is compared as two words; longer ones by memcmp.
  const std::string suffixes[] = {
      "",      "n",       ".bin",     ".safetens", "x.safetensors", "ab.cdefgh",        "bc",
      "12345", "1234567", "12345678", "123456789", ".safetensors",  "0123456789abcdef", "0123456789abcdefg"};
  const std::string names[] = {"",
                               "n",
                               "x.bin",
                               "a.safetensors",
                               "ab.safetensors",
                               "abcdefgh",
                               "12345678",
                               "0123456789",
                               "123456789",
                               "x12345678",
                               "model.bin2",
                               "b.cdefgh",
                               "zab.cdefgh",
                               "a/ab.cdefgh",
                               "7",
                               "1234567",
                               "x1234567",
                               "safetensors",
                               ".safetensors",
                               "x.safetensorz",
                               "y.safetensors",
                               "x.xafetensors",
                               "0123456789abcdef",
                               "x0123456789abcdef",
                               "1123456789abcdef",
                               "0123456789abcdefg",
                               "10123456789abcdefg",
                               "0023456789abcdefg",
                               "123456789abcdefg"};
  for (const std::string& suffix : suffixes) {
    PatternSet set;
    REQUIRE(set.compile("*" + suffix).empty());
    for (const std::string& name : names) {
      CAPTURE(suffix, name);
      const bool ends = name.size() >= suffix.size() &&
                        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
      CHECK(set.could_match(name) == (ends || name.empty()));
      // '*' does not cross '/'.
      CHECK(set.matches({}, name) == (ends && name.find('/') >= name.size() - suffix.size()));
    }
  }
}

TEST_CASE("matches_path says what matches says of the path and its file name") {
  // Issue 27: a guarded open matches its path once, its name found only when a pattern needs it.
  const char* specs[] = {"*.safetensors",
                         "*.safetensors:*.pt",
                         "*.safetensors:/data/**/*.bin",
                         "model-*.bin",
                         "*",
                         "/data/*",
                         "**/ckpt/*.pt:*.distcp",
                         "a\\*b:[xy]z",
                         "*.s[ab]"};
  const char* paths[] = {"/tmp/a.safetensors",
                         "/a.safetensors",
                         "/tmp/x.pt",
                         "/data/x/y.bin",
                         "/data/y.bin",
                         "/tmp/y.bin",
                         "/model-3.bin",
                         "/x/model-3.bin",
                         "/data/f",
                         "/data/g/h",
                         "/h/ckpt/w.pt",
                         "/h/ckptw.pt",
                         "/r/a*b",
                         "/r/yz",
                         "/",
                         "/q.sa",
                         "/q/r.sb",
                         "relative.safetensors",
                         "x/model-1.bin",
                         "/d/.safetensors"};
  for (const char* spec : specs) {
    PatternSet set;
    REQUIRE(set.compile(spec).empty());
    for (const char* path : paths) {
      CAPTURE(spec, path);
      CHECK(set.matches_path(path) == set.matches(path, file_name_of(path)));
    }
  }
  PatternSet set;
  REQUIRE(set.compile("*.safetensors:/data/**/*.bin").empty());
  CHECK(set.matches_path("/data/x/y.bin"));
  CHECK(set.matches_path("/tmp/a.safetensors"));
  CHECK_FALSE(set.matches_path("/tmp/y.bin"));
  CHECK_FALSE(set.matches_path("/tmp/a.safetensors.tmp"));
}
