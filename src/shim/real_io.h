// The real libc entry points we interpose, for the hooks and for guarded operations that must not
// re-enter them.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

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
}

// decltype(::write) carries glibc's nonnull/warn_unused_result attributes, which a template argument
// cannot keep; dropping them is what we want.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"

namespace appendguard {

APPENDGUARD_REAL(open);
APPENDGUARD_REAL(open64);
APPENDGUARD_REAL(__open_2);
APPENDGUARD_REAL(__open64_2);
APPENDGUARD_REAL(openat);
APPENDGUARD_REAL(openat64);
APPENDGUARD_REAL(__openat_2);
APPENDGUARD_REAL(__openat64_2);

APPENDGUARD_REAL(write);
APPENDGUARD_REAL(pwrite);
APPENDGUARD_REAL(pwrite64);
APPENDGUARD_REAL(writev);
APPENDGUARD_REAL(pwritev);
APPENDGUARD_REAL(pwritev64);
APPENDGUARD_REAL(pwritev2);
APPENDGUARD_REAL(pwritev64v2);
APPENDGUARD_REAL(sendfile);
APPENDGUARD_REAL(sendfile64);
APPENDGUARD_REAL(copy_file_range);
APPENDGUARD_REAL(splice);

APPENDGUARD_REAL(lseek);
APPENDGUARD_REAL(lseek64);
APPENDGUARD_REAL_OR(fstat, compat::fstat_by_syscall);
APPENDGUARD_REAL_OR(fstat64, compat::fstat64_by_syscall);
APPENDGUARD_REAL(__fxstat);
APPENDGUARD_REAL(__fxstat64);
APPENDGUARD_REAL(close);
APPENDGUARD_REAL(fsync);
APPENDGUARD_REAL(fdatasync);
APPENDGUARD_REAL(close_range);
APPENDGUARD_REAL(closefrom);
APPENDGUARD_REAL(dup);
APPENDGUARD_REAL(dup2);
APPENDGUARD_REAL(dup3);
APPENDGUARD_REAL(fcntl);
APPENDGUARD_REAL(fcntl64);

APPENDGUARD_REAL(ftruncate);
APPENDGUARD_REAL(ftruncate64);
APPENDGUARD_REAL(truncate);
APPENDGUARD_REAL(truncate64);
APPENDGUARD_REAL(fallocate);
APPENDGUARD_REAL(fallocate64);
APPENDGUARD_REAL(posix_fallocate);
APPENDGUARD_REAL(posix_fallocate64);

APPENDGUARD_REAL(read);
APPENDGUARD_REAL(pread);
APPENDGUARD_REAL(pread64);
APPENDGUARD_REAL(readv);
APPENDGUARD_REAL(preadv);
APPENDGUARD_REAL(preadv64);
APPENDGUARD_REAL(preadv2);
APPENDGUARD_REAL(preadv64v2);
APPENDGUARD_REAL(mmap);
APPENDGUARD_REAL(mmap64);

APPENDGUARD_REAL(recvmsg);
APPENDGUARD_REAL(recvmmsg);

APPENDGUARD_REAL(execve);
APPENDGUARD_REAL(execvpe);
APPENDGUARD_REAL(fexecve);
APPENDGUARD_REAL(execveat);
APPENDGUARD_REAL(posix_spawn);
APPENDGUARD_REAL(posix_spawnp);
APPENDGUARD_REAL(system);  // hooks_spawn.cpp
APPENDGUARD_REAL(popen);   // hooks_spawn.cpp

}  // namespace appendguard

#pragma GCC diagnostic pop

// ---------------------------------------------------------------- stdio (hooks_stdio.cpp)
extern "C" int __vdprintf_chk(int fd, int flag, const char* format, va_list args);

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"

namespace appendguard {

APPENDGUARD_REAL(fopen);
APPENDGUARD_REAL(fopen64);
APPENDGUARD_REAL(freopen);
APPENDGUARD_REAL(freopen64);
APPENDGUARD_REAL(fdopen);
APPENDGUARD_REAL(fclose);
APPENDGUARD_REAL(fflush);
APPENDGUARD_REAL(vdprintf);
APPENDGUARD_REAL(__vdprintf_chk);

}  // namespace appendguard

#pragma GCC diagnostic pop
