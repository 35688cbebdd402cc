#include <catch2/catch.hpp>

#include "core/cpu_features.h"

using appendguard::cpu_has_avx2;

TEST_CASE("cpu_has_avx2 answers as GCC's __builtin_cpu_supports, first asked and then remembered") {
  // The unit tests may link libgcc's detection (the library does not: core/cpu_features.h).
  __builtin_cpu_init();
  const bool expected = __builtin_cpu_supports("avx2") != 0;
  appendguard::detail::g_avx2.store(-1);
  REQUIRE(cpu_has_avx2() == expected);
  REQUIRE(appendguard::detail::g_avx2.load() == (expected ? 1 : 0));
  REQUIRE(cpu_has_avx2() == expected);  // the remembered answer
  REQUIRE(appendguard::detail::detect_avx2() == expected);
}
