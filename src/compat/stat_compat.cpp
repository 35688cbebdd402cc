// stat64 and fstatat64 became libc functions in glibc 2.33 (GLIBC_2.33); before that the headers turned
// them into calls to __xstat64/__fxstatat64. These definitions are local to the preload library (the
// version script exports neither), so its own calls resolve here, with the same system call glibc makes.
// On x86-64, struct stat64 is the kernel's struct stat. Where libc has fstatat64 (2.33+), found at start-up
// with dlsym (so no versioned symbol and no new needed library), ours calls it: the same system call,
// about ten instructions fewer than through libc's syscall() on every guarded open (issue 27).
#include "compat/stat_compat.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static_assert(sizeof(struct stat64) == sizeof(struct stat), "x86-64: one stat layout");

namespace {
// Our own `syscall` is the library's hook of it (shim/syscall_dispatch.cpp): 25 more instructions on
// every guarded open's fstatat. The shim gives libc's once it has it (use_libc_syscall).
long (*g_syscall)(long, ...) = ::syscall;

using Fstatat = int(int, const char*, struct stat64*, int) noexcept;
int fstatat_by_syscall(int dirfd, const char* path, struct stat64* st, int flags) noexcept {
  return static_cast<int>(g_syscall(SYS_newfstatat, dirfd, path, st, flags));
}
// libc's fstatat64 once the shim has looked it up (use_libc_syscall), else the system call.
Fstatat* g_fstatat = fstatat_by_syscall;
}  // namespace

extern "C" {
int fstatat64(int dirfd, const char* path, struct stat64* st, int flags) noexcept {
  return g_fstatat(dirfd, path, st, flags);
}
int stat64(const char* path, struct stat64* st) noexcept {
  return fstatat64(AT_FDCWD, path, st, 0);
}
}

namespace appendguard::compat {

void use_libc_syscall(long (*libc_syscall)(long, ...)) noexcept {
  if (libc_syscall) g_syscall = libc_syscall;
  // RTLD_NEXT: libc's, never a definition of this library (ours is not exported anyway). Null before
  // glibc 2.33, which has only __fxstatat64: the system call stays.
  if (void* libc_fstatat = dlsym(RTLD_NEXT, "fstatat64"))
    g_fstatat = reinterpret_cast<Fstatat*>(libc_fstatat);
}
int fstat_by_syscall(int fd, struct stat* st) noexcept {
  return static_cast<int>(g_syscall(SYS_fstat, fd, st));
}
int fstat64_by_syscall(int fd, struct stat64* st) noexcept {
  return static_cast<int>(g_syscall(SYS_fstat, fd, st));
}

}  // namespace appendguard::compat
