// The few pieces of the C++ runtime the preload library uses, defined here so that the static linker
// takes these instead of libstdc++'s: those throw exceptions, which pull in the unwinder (libgcc_eh, whose
// _Unwind_Find_FDE needs _dl_find_object, GLIBC_2.35) and the locale machinery (pthread_once@GLIBC_2.34,
// __libc_single_threaded@GLIBC_2.32, arc4random@GLIBC_2.36). The library is built without exceptions and
// RTTI; a failed allocation or a broken container invariant ends the process, as an uncaught exception
// would have.
#include <linux/futex.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <new>

namespace {

[[noreturn]] void fail(const char* what) {
  static const char prefix[] = "appendguard: fatal: ";
  (void)!::write(2, prefix, sizeof prefix - 1);
  size_t n = 0;
  while (what[n]) ++n;
  (void)!::write(2, what, n);
  (void)!::write(2, "\n", 1);
  abort();
}

}  // namespace

// glibc 2.32 tells libstdc++ through this variable that the process has one thread, so that reference
// counts may skip atomic instructions. Zero ("perhaps several threads") is always correct.
extern "C" {
char __libc_single_threaded = 0;
}

void* operator new(size_t size) {
  void* p = malloc(size ? size : 1);
  if (!p) fail("out of memory");
  return p;
}
void* operator new[](size_t size) {
  return operator new(size);
}
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  return malloc(size ? size : 1);
}
void* operator new[](size_t size, const std::nothrow_t&) noexcept {
  return malloc(size ? size : 1);
}
void operator delete(void* p) noexcept {
  free(p);
}
void operator delete[](void* p) noexcept {
  free(p);
}
void operator delete(void* p, size_t) noexcept {
  free(p);
}
void operator delete[](void* p, size_t) noexcept {
  free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  free(p);
}

// What the standard containers call where they would throw (bits/functexcept.h).
namespace std {
void __throw_bad_alloc() {
  fail("out of memory");
}
void __throw_bad_array_new_length() {
  fail("bad array new length");
}
void __throw_length_error(const char* what) {
  fail(what);
}
void __throw_logic_error(const char* what) {
  fail(what);
}
void __throw_out_of_range(const char* what) {
  fail(what);
}
void __throw_out_of_range_fmt(const char* what, ...) {
  fail(what);
}
void __throw_invalid_argument(const char* what) {
  fail(what);
}
void __throw_bad_function_call() {
  fail("bad function call");
}
}  // namespace std

// fmt::format_error derives from std::runtime_error, and header-only fmt emits its vtable in every file
// that includes it. No format_error is ever made (FMT_THROW is __builtin_abort(), fmt_config.h), so the
// two runtime_error members that vtable names are never called; defining them here keeps libstdc++'s
// exception classes (and the string and locale code behind them) out of the library.
extern "C" const char* appendguard_runtime_error_what(const void*) asm("_ZNKSt13runtime_error4whatEv");
extern "C" void appendguard_runtime_error_destroy(void*) asm("_ZNSt13runtime_errorD2Ev");
const char* appendguard_runtime_error_what(const void*) {
  fail("std::runtime_error::what called");
}
void appendguard_runtime_error_destroy(void*) {
  fail("std::runtime_error destroyed");
}

extern "C" {
void __cxa_throw_bad_array_new_length() {
  fail("bad array new length");
}
void __cxa_pure_virtual() {
  fail("pure virtual call");
}

// Function-local statics (Itanium C++ ABI 3.3.2). Byte 0 of the guard is "initialized", read by the
// compiler's inline fast path; the second 32-bit word is 0 (idle), 1 (being initialized) or 2 (being
// initialized, with waiters), and waiters sleep on it with a futex.
namespace {
std::atomic<int>* guard_state(uint64_t* guard) {
  return reinterpret_cast<std::atomic<int>*>(reinterpret_cast<int*>(guard) + 1);
}
std::atomic<char>* guard_done(uint64_t* guard) {
  return reinterpret_cast<std::atomic<char>*>(guard);
}
void guard_wake(std::atomic<int>* state) {
  syscall(SYS_futex, reinterpret_cast<int*>(state), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}
}  // namespace

int __cxa_guard_acquire(uint64_t* guard) {
  std::atomic<int>* state = guard_state(guard);
  for (;;) {
    if (guard_done(guard)->load(std::memory_order_acquire)) return 0;
    int expected = 0;
    if (state->compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
      if (guard_done(guard)->load(std::memory_order_acquire)) {  // finished while we looked
        if (state->exchange(0, std::memory_order_release) == 2) guard_wake(state);
        return 0;
      }
      return 1;
    }
    if (expected == 1 && !state->compare_exchange_strong(expected, 2, std::memory_order_relaxed)) continue;
    syscall(SYS_futex, reinterpret_cast<int*>(state), FUTEX_WAIT_PRIVATE, 2, nullptr, nullptr, 0);
  }
}

void __cxa_guard_release(uint64_t* guard) {
  guard_done(guard)->store(1, std::memory_order_release);
  if (guard_state(guard)->exchange(0, std::memory_order_release) == 2) guard_wake(guard_state(guard));
}

void __cxa_guard_abort(uint64_t* guard) {
  if (guard_state(guard)->exchange(0, std::memory_order_release) == 2) guard_wake(guard_state(guard));
}
}  // extern "C"
