// The libc functions behind our hooks, each resolved once with dlsym(RTLD_NEXT) on first use and then
// called through a plain pointer (a dlsym per call would cost ~36 ns).
#pragma once

#include <dlfcn.h>

#include <atomic>

namespace appendguard {

template <typename Fn>
class RealFunction;

namespace detail {

// The first call of a function that takes a fixed list of arguments: it resolves the real function
// (which replaces it in the pointer) and forwards to it. A pointer that starts here is never null, so the
// hooks call through it with one indirect jump and no test.
template <typename Fn>
struct FirstCall {
  static constexpr bool kAvailable = false;
};
template <typename R, typename... A>
struct FirstCall<R(A...)> {
  static constexpr bool kAvailable = true;
  template <const RealFunction<R(A...)>& real>
  static R call(A... args) {
    return real.resolve()(args...);
  }
};
template <typename R, typename... A>
struct FirstCall<R(A...) noexcept> {
  static constexpr bool kAvailable = true;
  template <const RealFunction<R(A...) noexcept>& real>
  static R call(A... args) noexcept {
    return real.resolve()(args...);
  }
};

}  // namespace detail

template <typename Fn>
class RealFunction {
 public:
  // `fallback` stands in where libc has no such name: fstat64 became a libc function only in glibc 2.33,
  // and our own code calls it (docs/design.md, "glibc floor"). `first_call` is first_call<Fn, object>()
  // for this very object: detail::FirstCall's function, or null for a variadic function (its arguments
  // cannot be forwarded), which is then tested on every call.
  constexpr RealFunction(const char* name, Fn* fallback, Fn* first_call)
      : name_(name), fallback_(fallback), first_call_(first_call), fn_(first_call) {}

  template <typename... Args>
  auto operator()(Args... args) const {
    Fn* fn = fn_.load(std::memory_order_relaxed);
    if constexpr (!detail::FirstCall<Fn>::kAvailable) {
      // Both branches are tail calls, so a hook's untracked path saves no registers.
      if (__builtin_expect(fn == nullptr, 0)) return resolve_and_call(args...);
    }
    return fn(args...);
  }
  Fn* get() const {
    Fn* fn = fn_.load(std::memory_order_relaxed);
    return fn == nullptr || fn == first_call_ ? resolve() : fn;
  }
  Fn* resolve() const {
    Fn* fn = reinterpret_cast<Fn*>(dlsym(RTLD_NEXT, name_));
    if (fn == nullptr) fn = fallback_;
    fn_.store(fn, std::memory_order_relaxed);
    return fn;
  }

 private:
  template <typename... Args>
  __attribute__((noinline, cold)) auto resolve_and_call(Args... args) const {
    return resolve()(args...);
  }

  const char* name_;
  Fn* fallback_;
  Fn* first_call_;
  mutable std::atomic<Fn*> fn_;
};

// The pointer a RealFunction<Fn> named `real` starts with.
template <typename Fn, const RealFunction<Fn>& real>
constexpr Fn* first_call() {
  if constexpr (detail::FirstCall<Fn>::kAvailable) {
    return &detail::FirstCall<Fn>::template call<real>;
  } else {
    return nullptr;
  }
}

}  // namespace appendguard
