// A per-thread stack of its own for recording an open's site (issue 27; issue 24, item 6): unwinding keeps
// libunwind's cursor and context, about 2 KiB, in the recording's frame (and loading libunwind, at the
// first stack needed, takes several KiB), and a guarded open must add at most 2 KiB to the program's
// stack. The recording runs on this stack instead, reached through a frame that unwinders step out of as
// an ordinary frame-pointer frame, so the frames recorded above it are the program's own. Mapped with
// mmap at a thread's first use (no malloc: opens run in signal handlers), with a guard page below it and
// the thread's remembered sites (report/site_chains.h) above it, unmapped when the thread exits.
#pragma once

#include <type_traits>

#include "core/hidden.h"
#include "report/site_chains.h"

namespace appendguard {

// Creates the key whose destructor unmaps a thread's stack. Call once, outside signal handlers.
void init_site_stack();

// Runs fn(arg) on this thread's site stack. Runs it where it is when already on it (a signal handler that
// interrupted a recording), when no memory can be mapped, and in sanitizer builds (which track the stack).
void run_on_site_stack(void (*fn)(void*), void* arg);
// The same for a callable (a lambda that captures what it needs by reference); returns what it returns.
template <typename Work>
auto run_on_site_stack(Work&& work) {
  using Result = std::invoke_result_t<Work&>;
  if constexpr (std::is_void_v<Result>) {
    using Callable = std::remove_reference_t<Work>;
    run_on_site_stack([](void* callable) { (*static_cast<Callable*>(callable))(); },
                      static_cast<void*>(&work));
  } else {
    Result result{};
    run_on_site_stack([&] { result = work(); });
    return result;
  }
}

// This thread's remembered open sites, in the same mapping, above the stack (mapped here if it was not
// yet; in sanitizer builds too); null if no memory can be mapped. Inline: every guarded open asks (issue
// 27: a call of its own).
extern APPENDGUARD_HIDDEN
    __attribute__((tls_model("initial-exec"))) constinit thread_local SiteChains* t_site_chains;
SiteChains* map_thread_site_chains();
inline SiteChains* thread_site_chains() {
  SiteChains* chains = t_site_chains;
  return __builtin_expect(chains != nullptr, 1) ? chains : map_thread_site_chains();
}
// The same if mapped already, else null (a thread's first recording maps them).
inline SiteChains* mapped_site_chains() {
  return t_site_chains;
}

}  // namespace appendguard
