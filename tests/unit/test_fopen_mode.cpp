#include <fcntl.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "core/fopen_mode.h"
#include "core/open_flags.h"

using namespace appendguard;

namespace {

std::string rewritten(const char* mode) {
  char out[32] = "untouched";
  if (!rewrite_fopen_mode(mode, out, sizeof out)) return "(invalid)";
  return out;
}

}  // namespace

TEST_CASE("fopen modes give glibc's open flags", "[fopen_mode]") {
  CHECK(parse_fopen_mode("r").flags == O_RDONLY);
  CHECK(parse_fopen_mode("rb").flags == O_RDONLY);
  CHECK(parse_fopen_mode("r+").flags == O_RDWR);
  CHECK(parse_fopen_mode("r+b").flags == O_RDWR);
  CHECK(parse_fopen_mode("rb+").flags == O_RDWR);
  CHECK(parse_fopen_mode("w").flags == (O_WRONLY | O_CREAT | O_TRUNC));
  CHECK(parse_fopen_mode("w+").flags == (O_RDWR | O_CREAT | O_TRUNC));
  CHECK(parse_fopen_mode("a").flags == (O_WRONLY | O_CREAT | O_APPEND));
  CHECK(parse_fopen_mode("a+").flags == (O_RDWR | O_CREAT | O_APPEND));
  CHECK(parse_fopen_mode("wx").flags == (O_WRONLY | O_CREAT | O_TRUNC | O_EXCL));
  CHECK(parse_fopen_mode("r+e").flags == (O_RDWR | O_CLOEXEC));
  CHECK(parse_fopen_mode("wbxe").flags == (O_WRONLY | O_CREAT | O_TRUNC | O_EXCL | O_CLOEXEC));
}

TEST_CASE("fopen mode letters that change no open flag are accepted and ignored", "[fopen_mode]") {
  CHECK(parse_fopen_mode("rt").flags == O_RDONLY);
  CHECK(parse_fopen_mode("rm").flags == O_RDONLY);
  CHECK(parse_fopen_mode("wc").flags == (O_WRONLY | O_CREAT | O_TRUNC));
  CHECK(parse_fopen_mode("r+tq").flags == O_RDWR);
  FopenMode m = parse_fopen_mode("a+be");
  CHECK(m.valid);
  CHECK(m.kind == 'a');
  CHECK(m.plus);
  CHECK(m.cloexec);
  CHECK_FALSE(m.exclusive);
  CHECK(m.reads());
  CHECK(m.writes());
}

TEST_CASE("fopen modes are read only as far as glibc reads them", "[fopen_mode]") {
  // glibc looks at the first character and the six after it.
  CHECK(parse_fopen_mode("rbbbbbb+").flags == O_RDONLY);
  CHECK(parse_fopen_mode("rbbbbb+").flags == O_RDWR);
  CHECK(parse_fopen_mode("wbbbbbbx").flags == (O_WRONLY | O_CREAT | O_TRUNC));
}

TEST_CASE("invalid fopen modes are recognized as such", "[fopen_mode]") {
  CHECK_FALSE(parse_fopen_mode(nullptr).valid);
  CHECK_FALSE(parse_fopen_mode("").valid);
  CHECK_FALSE(parse_fopen_mode("+r").valid);
  CHECK_FALSE(parse_fopen_mode("x").valid);
  CHECK_FALSE(parse_fopen_mode("R").valid);
  CHECK_FALSE(parse_fopen_mode("br").valid);
}

TEST_CASE("fopen modes with a character set are told apart", "[fopen_mode]") {
  CHECK(parse_fopen_mode("r,ccs=UTF-8").has_ccs);
  CHECK(parse_fopen_mode("w+b,ccs=UTF-16LE").has_ccs);
  CHECK(parse_fopen_mode("a,ccs=UTF-8").flags == (O_WRONLY | O_CREAT | O_APPEND));
  CHECK_FALSE(parse_fopen_mode("w+b").has_ccs);
  CHECK_FALSE(parse_fopen_mode("wccs=UTF-8").has_ccs);
  // glibc searches after the last of '+', 'x', 'b': a ",ccs=" before it is not a conversion.
  CHECK_FALSE(parse_fopen_mode("r,ccs=+").has_ccs);
}

TEST_CASE("fopencookie gets the stream's directions", "[fopen_mode]") {
  CHECK(std::strcmp(cookie_stream_mode(parse_fopen_mode("r+b")), "r+") == 0);
  CHECK(std::strcmp(cookie_stream_mode(parse_fopen_mode("rb")), "r") == 0);
  CHECK(std::strcmp(cookie_stream_mode(parse_fopen_mode("wbx")), "w") == 0);
  CHECK(std::strcmp(cookie_stream_mode(parse_fopen_mode("wb+e")), "w+") == 0);
  CHECK(std::strcmp(cookie_stream_mode(parse_fopen_mode("a")), "a") == 0);
  CHECK(std::strcmp(cookie_stream_mode(parse_fopen_mode("a+")), "a+") == 0);
  CHECK(std::strcmp(cookie_stream_mode(parse_fopen_mode("?")), "") == 0);
}

TEST_CASE("enforce mode rewrites read-write fopen modes into write-only append modes", "[fopen_mode]") {
  CHECK(rewritten("r+") == "ab");
  CHECK(rewritten("r+b") == "abb");
  CHECK(rewritten("rb+e") == "abbe");
  CHECK(rewritten("a+") == "ab");
  CHECK(rewritten("w+") == "wb");
  CHECK(rewritten("w+x") == "wbx");
  CHECK(rewritten("r+,ccs=UTF-8") == "ab,ccs=UTF-8");
  // Modes that already write only, and read-only modes, are left as they are.
  CHECK(rewritten("r") == "r");
  CHECK(rewritten("wb") == "wb");
  CHECK(rewritten("ae") == "ae");
  CHECK(rewritten("rbbbbbb+") == "rbbbbbb+");
  CHECK(rewritten("bogus") == "(invalid)");
}

TEST_CASE("rewritten fopen modes open the way the open(2) rewrite does", "[fopen_mode]") {
  // What glibc opens with the rewritten string, next to rewrite_open_flags of the original flags.
  // "r+" differs only by O_CREAT, which the caller covers by checking that the file exists; "w+" by
  // O_APPEND, which makes no difference on the empty file that O_TRUNC leaves.
  for (const char* mode : {"r+", "r+b", "a+", "a+e", "w+", "wx+", "a", "w", "r+e"}) {
    INFO(mode);
    char out[16];
    REQUIRE(rewrite_fopen_mode(mode, out, sizeof out));
    int from_string = parse_fopen_mode(out).flags;
    int from_flags = rewrite_open_flags(parse_fopen_mode(mode).flags);
    if (mode[0] == 'r') from_flags |= O_CREAT;
    if (mode[0] == 'w') from_flags &= ~O_APPEND;
    CHECK(from_string == from_flags);
  }
}

TEST_CASE("rewriting an fopen mode respects the output capacity", "[fopen_mode]") {
  char out[4] = "xyz";
  CHECK_FALSE(rewrite_fopen_mode("r+be", out, sizeof out));
  CHECK(std::string(out) == "xyz");
  CHECK(rewrite_fopen_mode("r+b", out, sizeof out));
  CHECK(std::string(out) == "abb");
}
