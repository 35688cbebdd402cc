// fstat and fstat64 for a libc that does not export them: before glibc 2.33 they were inline wrappers
// around __fxstat/__fxstat64, so dlsym finds neither name there.
#pragma once

#include <sys/stat.h>

namespace appendguard::compat {

int fstat_by_syscall(int fd, struct stat* st) noexcept;
int fstat64_by_syscall(int fd, struct stat64* st) noexcept;

}  // namespace appendguard::compat
