#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/config.h"
#include "core/errno_names.h"

using namespace appendguard;

// The library's own table replaces glibc 2.32's strerrorname_np (absent at the glibc 2.17 floor); on this
// machine's glibc both must agree for every value.
TEST_CASE("errno names match glibc's strerrorname_np") {
  for (int err = 0; err < 512; ++err) {
    const char* ours = linux_errno_name(err);
    const char* glibc = strerrorname_np(err);
    INFO("errno " << err);
    if (glibc == nullptr) {
      CHECK(ours == nullptr);
    } else {
      REQUIRE(ours != nullptr);
      CHECK(std::string(ours) == glibc);
    }
  }
}

TEST_CASE("errno_name names values outside the short list") {
  CHECK(std::string(errno_name(ENOTDIR)) == "ENOTDIR");
  CHECK(std::string(errno_name(EHWPOISON)) == "EHWPOISON");
  CHECK(std::string(errno_name(4000)) == "E?");
}
