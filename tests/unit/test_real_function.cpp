#include <catch2/catch.hpp>

#include "shim/real.h"

using appendguard::RealFunction;

namespace {

int stand_in(int x) {
  return x + 1000;
}

}  // namespace

// On glibc before 2.33 dlsym finds no "fstat64": the hook must call its stand-in, not a null pointer.
TEST_CASE("a real function that libc lacks calls its fallback") {
  RealFunction<int(int)> missing("appendguard_no_such_libc_function", &stand_in);
  CHECK(missing(1) == 1001);
  CHECK(missing.get() == &stand_in);
}

TEST_CASE("a real function that libc has ignores its fallback") {
  RealFunction<int(int)> present("abs", &stand_in);
  CHECK(present(-5) == 5);
}
