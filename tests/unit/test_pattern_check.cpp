#include <catch2/catch.hpp>

#include <string>

#include "core/pattern_check.h"

using namespace appendguard;

namespace {

bool fake_is_directory(const char* path) {
  return std::string(path) == "/mnt/ckpt" || std::string(path) == "checkpoints";
}

std::string problem(const char* pattern) {
  return pattern_problem(pattern, fake_is_directory);
}

}  // namespace

TEST_CASE("patterns that are fine") {
  for (const char* ok :
       {"*.safetensors", "/mnt/hdfs/**", "model-?-of-*.safetensors", "/mnt/ckpt/*.bin", "**/ckpt/*", "[,]x",
        "*.bin", "/mnt/ckpt/**", "x.s", "*.distcp", "/a/b.c", "$", "a$1"}) {
    INFO(ok);
    CHECK(problem(ok).empty());
  }
}

TEST_CASE("patterns that cannot match any file") {
  CHECK(problem("/mnt/ckpt/").find("cannot match any file: it ends with '/'") == 0);
  CHECK(problem("/mnt/ckpt/").find("'/mnt/ckpt/**'") != std::string::npos);
  CHECK(problem("/mnt//ckpt/*").find("contains '//'") != std::string::npos);
  CHECK(problem("/mnt/./ckpt/*").find("contains '/./'") != std::string::npos);
  CHECK(problem("/mnt/x/../ckpt/*").find("contains '/../'") != std::string::npos);
  CHECK(problem("/mnt/ckpt/.").find("ends with '/.'") != std::string::npos);
  CHECK(problem("/mnt/ckpt").find("names a directory") == 0);
  CHECK(problem("/mnt/ckpt").find("'/mnt/ckpt/**'") != std::string::npos);
  CHECK(problem("checkpoints").find("names a directory") == 0);
  CHECK(pattern_problem("/mnt/ckpt", nullptr).empty());  // no directory test given
}

TEST_CASE("patterns that are very likely not what was meant") {
  CHECK(problem("*.safetensors,*.bin").find("contains ','") == 0);
  CHECK(problem(" *.safetensors").find("space or a quote") != std::string::npos);
  CHECK(problem("'*.safetensors'").find("space or a quote") != std::string::npos);
  CHECK(problem("*.safetensors\t").find("space or a quote") != std::string::npos);
  CHECK(problem("$CKPT/**").find("not expanded") != std::string::npos);
  CHECK(problem("/x/${DIR}/*").find("not expanded") != std::string::npos);
  CHECK(problem("*.safetensor") == "matches names ending in '.safetensor', not '.safetensors': misspelt?");
  CHECK(problem("*.safet").find("misspelt") != std::string::npos);
  CHECK(problem("*.distc").find("'.distcp'") != std::string::npos);
}

TEST_CASE("one notice per suspect pattern of a list") {
  auto notices = pattern_notices("*.safetensors:/mnt/ckpt/:*.safetensor", fake_is_directory);
  REQUIRE(notices.size() == 2);
  CHECK(notices[0].find("appendguard: APPENDGUARD_PATHS pattern '/mnt/ckpt/' cannot match") == 0);
  CHECK(notices[1].find("pattern '*.safetensor' matches names ending") != std::string::npos);
  CHECK(pattern_notices("", fake_is_directory).empty());
  CHECK(pattern_notices("*.safetensors", fake_is_directory).empty());
}
