// Read-modify-writes without x86's lock prefix while the process has one thread. The lock prefix makes
// an instruction atomic with respect to other processors; a signal handler runs between two instructions
// of the thread it interrupts, so one cmpxchg or xadd without the prefix is already atomic with respect
// to it. While no other thread exists, the prefix buys nothing (issue 27: the guarded write's pin, lock,
// unlock and unpin).
//
// Whether the process has one thread is glibc's __libc_single_threaded (glibc 2.32+, what libstdc++'s
// reference counts read): true until the first pthread_create, which clears it before the new thread
// exists. It only goes from true to false through a pthread_create of the one thread there is, so a
// value read true stays true until this thread creates one (pthread_create is not async-signal-safe, so
// no signal handler does). Each operation reads it again: a lock taken without the prefix and released
// after a thread was created is released with it (and wakes a waiter). Where glibc lacks the variable
// (older than 2.32) the flag stays a constant zero: always the locked path. Threads made by a raw clone
// (not pthread_create) are not seen by glibc either (docs/limits.md).
//
// Under ThreadSanitizer, and on other processors, these are the std::atomic operations always: TSan does
// not see inline assembly.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "core/hidden.h"

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define APPENDGUARD_UNLOCKED_WHEN_SINGLE_THREADED 1
#else
#define APPENDGUARD_UNLOCKED_WHEN_SINGLE_THREADED 0
#endif

namespace appendguard::single_thread {

namespace detail {
inline constexpr char kPerhapsSeveral = 0;
// The flag read: glibc's once use_flag() found it (at start-up), until then a constant "perhaps several".
APPENDGUARD_HIDDEN inline constinit const char* g_flag = &kPerhapsSeveral;
}  // namespace detail

// Reads `flag` from now on (glibc's __libc_single_threaded; a test's own; nullptr: always several).
inline void use_flag(const char* flag) {
  __atomic_store_n(&detail::g_flag, flag ? flag : &detail::kPerhapsSeveral, __ATOMIC_RELAXED);
}

// True only while the process has one thread. A relaxed read: the flag changes in this thread only.
inline bool process_has_one_thread() {
  if constexpr (!APPENDGUARD_UNLOCKED_WHEN_SINGLE_THREADED) return false;
  return __atomic_load_n(__atomic_load_n(&detail::g_flag, __ATOMIC_RELAXED), __ATOMIC_RELAXED) != 0;
}

template <typename T>
concept Word = std::is_integral_v<T> &&(sizeof(T) == 4 || sizeof(T) == 8) &&
               sizeof(std::atomic<T>) == sizeof(T) && std::atomic<T>::is_always_lock_free;

// One cmpxchg without the lock prefix: as compare_exchange_strong, atomic with respect to this thread's
// signal handlers only. The "memory" clobber keeps the compiler from moving memory accesses across it.
template <Word T>
inline bool compare_exchange_unlocked(std::atomic<T>& word, T& expected, T desired) {
#if APPENDGUARD_UNLOCKED_WHEN_SINGLE_THREADED
  bool exchanged;
  __asm__ volatile("cmpxchg %[desired], %[word]"
                   : "+a"(expected), [word] "+m"(*reinterpret_cast<T*>(&word)), "=@ccz"(exchanged)
                   : [desired] "r"(desired)
                   : "memory");
  return exchanged;
#else
  return word.compare_exchange_strong(expected, desired, std::memory_order_acq_rel,
                                      std::memory_order_acquire);
#endif
}

// One xadd without the lock prefix: as fetch_add, atomic with respect to this thread's signal handlers.
template <Word T>
inline T fetch_add_unlocked(std::atomic<T>& word, T delta) {
#if APPENDGUARD_UNLOCKED_WHEN_SINGLE_THREADED
  __asm__ volatile("xadd %[delta], %[word]"
                   : [delta] "+r"(delta), [word] "+m"(*reinterpret_cast<T*>(&word))
                   :
                   : "memory", "cc");
  return delta;
#else
  return word.fetch_add(delta, std::memory_order_acq_rel);
#endif
}

// compare_exchange_strong (acq_rel), without the lock prefix while the process has one thread.
template <Word T>
inline bool compare_exchange(std::atomic<T>& word, T& expected, T desired) {
  if (process_has_one_thread()) return compare_exchange_unlocked(word, expected, desired);
  return word.compare_exchange_strong(expected, desired, std::memory_order_acq_rel,
                                      std::memory_order_acquire);
}

// fetch_add (acq_rel), without the lock prefix while the process has one thread.
template <Word T>
inline T fetch_add(std::atomic<T>& word, T delta) {
  if (process_has_one_thread()) return fetch_add_unlocked(word, delta);
  return word.fetch_add(delta, std::memory_order_acq_rel);
}

}  // namespace appendguard::single_thread
