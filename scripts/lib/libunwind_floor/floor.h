// Included first in every file of libunwind as the wheel carries it (scripts/lib/build_libunwind.sh):
// binds the libc names libunwind uses whose default version is newer than GLIBC_2.17 to their old one, so
// that the wheel keeps the manylinux_2_17 floor (stat and fstat, which have no old version, are
// stat_floor.c's).
#if defined(__x86_64__) && defined(__linux__) && !defined(__ASSEMBLER__)
__asm__(".symver pthread_key_create,pthread_key_create@GLIBC_2.2.5");
__asm__(".symver pthread_once,pthread_once@GLIBC_2.2.5");
__asm__(".symver pthread_setspecific,pthread_setspecific@GLIBC_2.2.5");
__asm__(".symver pthread_getspecific,pthread_getspecific@GLIBC_2.2.5");
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
__asm__(".symver dl_iterate_phdr,dl_iterate_phdr@GLIBC_2.2.5");
#endif
