#include <catch2/catch.hpp>

#include "shim/real.h"

using appendguard::first_call;
using appendguard::RealFunction;

namespace {

int stand_in(int x) {
  return x + 1000;
}

// Objects of static storage, as the library's are: the first-call pointer names the object itself.
constinit RealFunction<int(int)> g_missing{"appendguard_no_such_libc_function", &stand_in,
                                           first_call<int(int), g_missing>()};
constinit RealFunction<int(int)> g_present{"abs", &stand_in, first_call<int(int), g_present>()};
constinit RealFunction<int(int)> g_unresolved{"abs", nullptr, first_call<int(int), g_unresolved>()};
// A variadic function cannot forward its arguments from a first call: it starts null and is tested.
constinit RealFunction<int(const char*, ...)> g_variadic{"printf", nullptr, nullptr};

}  // namespace

// On glibc before 2.33 dlsym finds no "fstat64": the hook must call its stand-in, not a null pointer.
TEST_CASE("a real function that libc lacks calls its fallback") {
  CHECK(g_missing(1) == 1001);
  CHECK(g_missing.get() == &stand_in);
  CHECK(g_missing(2) == 1002);
}

TEST_CASE("a real function that libc has ignores its fallback") {
  CHECK(g_present(-5) == 5);
  CHECK(g_present.get() != &stand_in);
  CHECK(g_present(-6) == 6);
}

TEST_CASE("get() resolves a function never called, instead of returning its first call") {
  int (*const resolved)(int) = g_unresolved.get();
  CHECK(resolved != first_call<int(int), g_unresolved>());
  CHECK(resolved(-7) == 7);
  CHECK(g_unresolved(-8) == 8);
}

TEST_CASE("a variadic real function is resolved on its first call") {
  CHECK(g_variadic("%s", "") == 0);
  CHECK(g_variadic.get() != nullptr);
}
