// Included first in every file of the preload library (-include): binds the libc names whose current
// version is newer than GLIBC_2.17 to the oldest version glibc still provides, so that the library loads
// on glibc 2.17 (manylinux2014, RHEL 7) and everything newer. Names with no old version (stat64,
// strerrorname_np, ...) are not pinned here: they are avoided or replaced (see cxx_runtime.cpp,
// stat_compat.cpp and docs/design.md), and packaging.glibc_floor fails on any that comes back.
#pragma once

#if defined(__x86_64__) && defined(__linux__)
// libdl moved into libc in glibc 2.34 (new default versions GLIBC_2.34); GLIBC_2.2.5 is the original.
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
__asm__(".symver dlclose,dlclose@GLIBC_2.2.5");
#endif
