// stat and fstat became libc functions in glibc 2.33 (GLIBC_2.33); before, the headers made them __xstat
// calls. libunwind is linked with --wrap=stat,--wrap=fstat to these: the same system calls, no versioned
// symbol.
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((visibility("hidden"))) int __wrap_stat(const char* path, struct stat* st) {
  return (int)syscall(SYS_stat, path, st);
}
__attribute__((visibility("hidden"))) int __wrap_fstat(int fd, struct stat* st) {
  return (int)syscall(SYS_fstat, fd, st);
}
