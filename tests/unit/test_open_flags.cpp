#include <catch2/catch.hpp>

#include <fcntl.h>

#include <string>

#include "core/open_flags.h"

using namespace appendguard;

static std::string text(int flags) {
  char buf[200];
  format_open_flags(flags, buf, sizeof buf);
  return buf;
}

TEST_CASE("write opens") {
  CHECK_FALSE(is_write_open(O_RDONLY));
  CHECK_FALSE(is_write_open(O_RDONLY | O_CLOEXEC));
  CHECK(is_write_open(O_WRONLY));
  CHECK(is_write_open(O_RDWR));
  CHECK(is_write_open(O_RDONLY | O_TRUNC));
}

TEST_CASE("rewrite") {
  CHECK(rewrite_open_flags(O_RDONLY) == O_RDONLY);
  CHECK(rewrite_open_flags(O_RDWR) == (O_WRONLY | O_APPEND));
  CHECK(rewrite_open_flags(O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW) ==
        (O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW));
  // "w+b" as "wb": no O_APPEND, which rclone --vfs-cache-mode off refuses after O_TRUNC (ESPIPE).
  CHECK(rewrite_open_flags(O_RDWR | O_TRUNC | O_CREAT) == (O_WRONLY | O_TRUNC | O_CREAT));
  CHECK(rewrite_open_flags(O_RDWR | O_TRUNC | O_APPEND) == (O_WRONLY | O_TRUNC | O_APPEND));
  CHECK(rewrite_open_flags(O_WRONLY) == (O_WRONLY | O_APPEND));
  CHECK(rewrite_open_flags(O_WRONLY | O_CREAT) == (O_WRONLY | O_APPEND | O_CREAT));
  CHECK(rewrite_open_flags(O_WRONLY | O_TRUNC | O_CREAT) == (O_WRONLY | O_TRUNC | O_CREAT));
  CHECK(rewrite_open_flags(O_WRONLY | O_APPEND) == (O_WRONLY | O_APPEND));
  CHECK(rewrite_open_flags(O_RDWR | O_TMPFILE) == (O_WRONLY | O_APPEND | O_TMPFILE));
}

TEST_CASE("format") {
  CHECK(text(O_RDONLY) == "O_RDONLY");
  CHECK(text(O_RDWR | O_CREAT | O_CLOEXEC) == "O_RDWR|O_CREAT|O_CLOEXEC");
  CHECK(text(O_WRONLY | O_APPEND) == "O_WRONLY|O_APPEND");
  CHECK(text(O_WRONLY | O_SYNC) == "O_WRONLY|O_SYNC");
  CHECK(text(O_WRONLY | O_DSYNC) == "O_WRONLY|O_DSYNC");
  CHECK(text(O_RDWR | O_TMPFILE) == "O_RDWR|O_TMPFILE");
  CHECK(text(O_RDONLY | O_DIRECTORY) == "O_RDONLY|O_DIRECTORY");
  char small[6];
  format_open_flags(O_RDWR | O_CREAT, small, sizeof small);
  CHECK(std::string(small) == "O_RDW");
}

TEST_CASE("opens that keep the existing bytes, and their rewrite by truncation") {
  CHECK(keeps_existing_bytes(O_RDWR));
  CHECK(keeps_existing_bytes(O_WRONLY | O_CREAT));
  CHECK(keeps_existing_bytes(O_WRONLY | O_APPEND));
  CHECK_FALSE(keeps_existing_bytes(O_RDONLY));
  CHECK_FALSE(keeps_existing_bytes(O_RDWR | O_TRUNC));
  CHECK_FALSE(keeps_existing_bytes(O_RDWR | O_TMPFILE));
  CHECK(rewrite_open_flags_by_truncation(O_RDWR | O_CLOEXEC) == (O_WRONLY | O_TRUNC | O_CLOEXEC));
  CHECK(rewrite_open_flags_by_truncation(O_WRONLY | O_APPEND | O_CREAT) == (O_WRONLY | O_TRUNC | O_CREAT));
}
