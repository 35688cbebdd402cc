// The real libc entry points we interpose (one per row of interposed.def), for the hooks and for guarded
// operations that must not re-enter them.
#pragma once

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>  // system(); GCC 13 (Ubuntu 24.04) no longer brings it in through the others
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <string_view>
#include <type_traits>

#include "compat/stat_compat.h"
#include "shim/real.h"

extern "C" {
// Fortified and 64-bit names that the headers declare only under _FORTIFY_SOURCE or not at all.
int __open_2(const char* path, int flags);
int __open64_2(const char* path, int flags);
int __openat_2(int dirfd, const char* path, int flags);
int __openat64_2(int dirfd, const char* path, int flags);
// What fstat and fstat64 compile to against glibc before 2.33 (and what sanitizers' fstat calls); glibc
// 2.33+ headers no longer declare them.
int __fxstat(int version, int fd, struct stat* st);
int __fxstat64(int version, int fd, struct stat64* st);
// The fortified dprintf names (stdio.h declares them only under _FORTIFY_SOURCE).
int __dprintf_chk(int fd, int flag, const char* format, ...);
int __vdprintf_chk(int fd, int flag, const char* format, va_list args);
}

// decltype(::write) carries glibc's nonnull/warn_unused_result attributes, which a template argument
// cannot keep; dropping them is what we want.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"

namespace appendguard {

// renameat2 is in libc since glibc 2.28; before, the system call (our hook and the raw-system-call layer
// call it).
inline int renameat2_by_syscall(int old_dirfd, const char* old_path, int new_dirfd, const char* new_path,
                                unsigned int flags) noexcept(noexcept(::renameat2(0, nullptr, 0, nullptr,
                                                                                  0))) {
  return static_cast<int>(syscall(SYS_renameat2, old_dirfd, old_path, new_dirfd, new_path, flags));
}

// Where libc lacks a name we call ourselves (older glibc), the function that stands in for it.
template <typename Fn>
constexpr Fn* real_fallback(std::string_view name) {
  if constexpr (std::is_same_v<Fn, decltype(::fstat)>) {
    if (name == "fstat") return compat::fstat_by_syscall;
  } else if constexpr (std::is_same_v<Fn, decltype(::fstat64)>) {
    if (name == "fstat64") return compat::fstat64_by_syscall;
  } else if constexpr (std::is_same_v<Fn, decltype(renameat2_by_syscall)>) {
    if (name == "renameat2") return renameat2_by_syscall;
  }
  return nullptr;
}

// The type a real function is called with: its own, but for open, open64, openat and openat64, whose
// variadic mode is passed as the fixed argument it is on x86-64: the System V ABI passes a variadic
// integer in the register of the next fixed parameter, and %al, which a variadic call sets to the number
// of vector registers used, only tells the callee whether to save vector registers it never reads. glibc's
// open reads the mode only with O_CREAT or O_TMPFILE. The hooks take it the same way (hooks_open.cpp).
// Without a variadic part the pointer can start at its first-call trampoline and is never null (real.h).
template <typename Fn>
struct RealCall {
  using type = Fn;
};
template <>
struct RealCall<int(const char*, int, ...)> {
  using type = int(const char*, int, mode_t);
};
template <>
struct RealCall<int(int, const char*, int, ...)> {
  using type = int(int, const char*, int, mode_t);
};
template <typename Fn>
using RealCallOf = typename RealCall<Fn>::type;

// Declares `real_NAME`, callable like NAME itself, for a function declared by the libc headers.
#define APPENDGUARD_REAL_FUNCTION(name)                                    \
  inline constinit RealFunction<RealCallOf<decltype(::name)>> real_##name{ \
      #name, real_fallback<RealCallOf<decltype(::name)>>(#name),           \
      first_call<RealCallOf<decltype(::name)>, real_##name>()};

// `real_NAME` for every row of interposed.def.
#define INTERPOSED(name, kind, twin64, ret, params) APPENDGUARD_REAL_FUNCTION(name)
#include "shim/interposed.def"

// Not interposed, but called by the stdio hooks.
APPENDGUARD_REAL_FUNCTION(fflush)

}  // namespace appendguard

#pragma GCC diagnostic pop
