#include <fcntl.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "core/carried_fds.h"

using namespace appendguard;

namespace {

CarriedFd carried(int fd, uint64_t inode, int original, int effective, uint64_t position) {
  CarriedFd f;
  f.fd = fd;
  f.device = 0x803;
  f.inode = inode;
  f.original_flags = original;
  f.effective_flags = effective;
  f.position = position;
  return f;
}

const char* value_of(const char* assignment) {
  return std::strchr(assignment, '=') + 1;
}

}  // namespace

TEST_CASE("carried descriptors survive formatting and parsing") {
  const CarriedFd fds[] = {carried(3, 77, O_RDWR, O_WRONLY | O_APPEND, 10),
                           carried(1, 0xffffffffffULL, O_WRONLY | O_TRUNC, O_WRONLY | O_TRUNC, 1ULL << 40)};
  char text[256];
  REQUIRE(format_carried_fds({4242, false}, fds, 2, text, sizeof text) == 2);
  CHECK(std::string(text).rfind("APPENDGUARD_CARRIED_FDS=", 0) == 0);
  CarriedFd parsed[4];
  REQUIRE(parse_carried_fds(value_of(text), 4242, 1, parsed, 4) == 2);
  CHECK(parsed[0].fd == 3);
  CHECK(parsed[0].inode == 77);
  CHECK(parsed[0].original_flags == O_RDWR);
  CHECK(parsed[0].effective_flags == (O_WRONLY | O_APPEND));
  CHECK(parsed[0].position == 10);
  CHECK(parsed[1].inode == 0xffffffffffULL);
  CHECK(parsed[1].position == 1ULL << 40);
}

TEST_CASE("a variable written by another process or malformed is ignored") {
  const CarriedFd fds[] = {carried(3, 77, O_RDWR, O_WRONLY | O_APPEND, 10)};
  char text[256];
  format_carried_fds({4242, false}, fds, 1, text, sizeof text);
  CarriedFd parsed[4];
  CHECK(parse_carried_fds(value_of(text), 4243, 4242, parsed, 4) == 0);
  CHECK(parse_carried_fds(value_of(text), 4242, 7, parsed, 4) == 1);
  format_carried_fds({4242, true}, fds, 1, text, sizeof text);  // for the children 4242 spawns
  CHECK(parse_carried_fds(value_of(text), 4242, 7, parsed, 4) == 0);
  CHECK(parse_carried_fds(value_of(text), 5000, 4242, parsed, 4) == 1);
  CHECK(parse_carried_fds("", 1, 0, parsed, 4) == 0);
  CHECK(parse_carried_fds("1;3,1,2", 1, 0, parsed, 4) == 0);
  CHECK(parse_carried_fds("1;3,1,2,2,401,x", 1, 0, parsed, 4) == 0);
  CHECK(parse_carried_fds("1;3,1,2,2,401,0;", 1, 0, parsed, 4) == 0);
  CHECK(parse_carried_fds("1;3,1,2,2,401,0", 1, 0, parsed, 4) == 1);
  CHECK(parse_carried_fds("1;3,1,2,2,401,11111111111111111", 1, 0, parsed, 4) == 0);  // 17 digits
}

TEST_CASE("records that do not fit are left out whole") {
  CarriedFd fds[20];
  for (int i = 0; i < 20; ++i) fds[i] = carried(i, 1000 + i, O_RDWR, O_WRONLY | O_APPEND, 0);
  char text[100];
  size_t written = format_carried_fds({1, false}, fds, 20, text, sizeof text);
  CHECK(written > 0);
  CHECK(written < 20);
  CHECK(std::strlen(text) < sizeof text);
  CarriedFd parsed[20];
  CHECK(parse_carried_fds(value_of(text), 1, 0, parsed, 20) == written);
}

TEST_CASE("carried_fds_capacity leaves no record out, whatever the numbers") {
  constexpr size_t kCount = 300;
  static CarriedFd fds[kCount];
  for (size_t i = 0; i < kCount; ++i) {
    fds[i] = CarriedFd{0x7fffffff, ~uint64_t{0}, ~uint64_t{0}, -1, -1, ~uint64_t{0}};
  }
  static char text[carried_fds_capacity(kCount)];
  CHECK(format_carried_fds({0x7fffffff, true}, fds, kCount, text, sizeof text) == kCount);
  CHECK(count_carried_records(value_of(text)) == kCount);
  static CarriedFd parsed[kCount];
  CHECK(parse_carried_fds(value_of(text), 1, 0x7fffffff, parsed, kCount) == kCount);
  CHECK(parsed[kCount - 1].position == ~uint64_t{0});
}

TEST_CASE("a complete record set says so, even with no record, and only for the process itself") {
  char text[200];
  bool complete = false;
  format_carried_fds({4242, false, true}, nullptr, 0, text, sizeof text);
  CHECK(std::string(value_of(text)) == "c1092");
  CHECK(parse_carried_fds(value_of(text), 4242, 1, nullptr, 0, &complete) == 0);
  CHECK(complete);
  CHECK(parse_carried_fds(value_of(text), 4243, 1, nullptr, 0, &complete) == 0);
  CHECK_FALSE(complete);  // not for this process: the new program scans
  CarriedFd fds[1] = {carried(3, 77, O_RDWR, O_WRONLY | O_APPEND, 10)};
  format_carried_fds({4242, false, true}, fds, 1, text, sizeof text);
  CarriedFd parsed[1];
  CHECK(parse_carried_fds(value_of(text), 4242, 1, parsed, 1, &complete) == 1);
  CHECK(complete);
  CHECK(parse_carried_fds(value_of(text), 4242, 1, parsed, 0, &complete) == 0);
  CHECK_FALSE(complete);                                              // a record left unread: not complete
  format_carried_fds({4242, true, true}, fds, 1, text, sizeof text);  // a spawn's records are never complete
  CHECK(parse_carried_fds(value_of(text), 5000, 4242, parsed, 1, &complete) == 1);
  CHECK_FALSE(complete);
  format_carried_fds({4242, false}, fds, 1, text, sizeof text);
  CHECK(parse_carried_fds(value_of(text), 4242, 1, parsed, 1, &complete) == 1);
  CHECK_FALSE(complete);
}

TEST_CASE("a carried descriptor is found by number, else by file and placement, rewritten first") {
  const CarriedFd fds[] = {carried(5, 77, O_WRONLY | O_APPEND, O_WRONLY | O_APPEND, 0),
                           carried(3, 77, O_RDWR, O_WRONLY | O_APPEND, 10),
                           carried(4, 78, O_WRONLY | O_TRUNC, O_WRONLY | O_TRUNC, 3)};
  CHECK(match_carried_fd(fds, 3, 5, 0x803, 77, O_WRONLY | O_APPEND) == &fds[0]);
  // dup2'd onto stdout by spawn: the rewritten record of that file wins.
  CHECK(match_carried_fd(fds, 3, 1, 0x803, 77, O_WRONLY | O_APPEND) == &fds[1]);
  CHECK(match_carried_fd(fds, 3, 1, 0x803, 78, O_WRONLY) == &fds[2]);
  CHECK(match_carried_fd(fds, 3, 1, 0x803, 78, O_WRONLY | O_APPEND) == nullptr);  // another open of it
  CHECK(match_carried_fd(fds, 3, 1, 0x803, 79, O_WRONLY) == nullptr);
}
