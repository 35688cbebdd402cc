// Processor features the library's vector code chooses by, each learned at its first use (issue 27).
// Not through GCC's __builtin_cpu_supports: that links libgcc's __cpu_indicator_init, a constructor that
// runs a dozen CPUID instructions in every process at load, and under a hypervisor each CPUID exits to
// it (3.6 us each on the CI machine: ~60 us added to every program's start-up).
#pragma once

#include <atomic>

namespace appendguard {
namespace detail {
// -1: not asked yet; 0 or 1 once detect_avx2 has run (it may run more than once: same answer).
extern constinit std::atomic<signed char> g_avx2;
bool detect_avx2();
}  // namespace detail

// AVX2 is there and the operating system saves the YMM registers (what __builtin_cpu_supports("avx2")
// answers). Async-signal-safe; the first call executes CPUID three times.
inline bool cpu_has_avx2() {
  signed char known = detail::g_avx2.load(std::memory_order_relaxed);
  if (__builtin_expect(known < 0, 0)) return detail::detect_avx2();
  return known != 0;
}

}  // namespace appendguard
