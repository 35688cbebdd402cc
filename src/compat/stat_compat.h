// fstat and fstat64 for a libc that does not export them: before glibc 2.33 they were inline wrappers
// around __fxstat/__fxstat64, so dlsym finds neither name there.
#pragma once

#include <sys/stat.h>

namespace appendguard::compat {

// The system calls of these (and of fstatat64/stat64, defined here for glibc before 2.33) go through
// libc's syscall() once the shim passes it; before, through the library's own `syscall`. fstatat64 (and
// stat64) go through libc's own fstatat64 from then on where libc has one (glibc 2.33+).
void use_libc_syscall(long (*libc_syscall)(long, ...)) noexcept;
int fstat_by_syscall(int fd, struct stat* st) noexcept;
int fstat64_by_syscall(int fd, struct stat64* st) noexcept;

}  // namespace appendguard::compat
