// The libc functions behind our hooks, each resolved once with dlsym(RTLD_NEXT) on first use and then
// called through a plain pointer (a dlsym per call would cost ~36 ns).
#pragma once

#include <dlfcn.h>

#include <atomic>

namespace appendguard {

template <typename Fn>
class RealFunction {
 public:
  // `fallback` stands in where libc has no such name: fstat64 became a libc function only in glibc 2.33,
  // and our own code calls it (docs/design.md, "glibc floor").
  explicit constexpr RealFunction(const char* name, Fn* fallback = nullptr)
      : name_(name), fallback_(fallback) {}

  template <typename... Args>
  auto operator()(Args... args) const {
    Fn* fn = fn_.load(std::memory_order_relaxed);
    // Both branches are tail calls, so a hook's untracked path saves no registers.
    if (__builtin_expect(fn == nullptr, 0)) return resolve_and_call(args...);
    return fn(args...);
  }
  Fn* get() const {
    Fn* fn = fn_.load(std::memory_order_relaxed);
    return fn ? fn : resolve();
  }

 private:
  template <typename... Args>
  __attribute__((noinline, cold)) auto resolve_and_call(Args... args) const {
    return resolve()(args...);
  }

  Fn* resolve() const {
    Fn* fn = reinterpret_cast<Fn*>(dlsym(RTLD_NEXT, name_));
    if (fn == nullptr) fn = fallback_;
    fn_.store(fn, std::memory_order_relaxed);
    return fn;
  }

  const char* name_;
  Fn* fallback_;
  mutable std::atomic<Fn*> fn_{nullptr};
};

}  // namespace appendguard

// Declares `real_NAME`, callable like NAME itself, for a function declared by the libc headers.
#define APPENDGUARD_REAL(name)                                                 \
  inline constinit ::appendguard::RealFunction<decltype(::name)> real_##name { \
#name                                                                      \
  }
// The same, with a function that stands in where libc lacks `name` (older glibc).
#define APPENDGUARD_REAL_OR(name, fallback)                                    \
  inline constinit ::appendguard::RealFunction<decltype(::name)> real_##name { \
#name, fallback                                                            \
  }
