#include "core/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace appendguard {
namespace detail {

constinit std::atomic<signed char> g_avx2{-1};

bool detect_avx2() {
  bool avx2 = false;
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid(1, eax, ebx, ecx, edx);
    bool ymm_saved = false;
    if ((ecx & bit_OSXSAVE) && (ecx & bit_AVX)) {
      unsigned low = 0, high = 0;
      __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
      ymm_saved = (low & 6) == 6;  // XMM and YMM state enabled in XCR0
    }
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    avx2 = ymm_saved && (ebx & bit_AVX2);
  }
#endif
  g_avx2.store(avx2 ? 1 : 0, std::memory_order_relaxed);
  return avx2;
}

}  // namespace detail
}  // namespace appendguard
