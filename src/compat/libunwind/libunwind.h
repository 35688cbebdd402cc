// The part of libunwind.h (libunwind 1.6, x86-64, UNW_LOCAL_ONLY) that src/report/backtrace.cpp uses,
// for builds without libunwind's headers (the library-only build needs only CMake, a C++20 compiler and
// fmt). The library never links libunwind: it dlopens libunwind.so.8 and looks these names up, so only
// the names, the sizes and the accessor layout matter; tests/unit/test_libunwind_abi.cpp compares them
// with the real header.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#if !defined(__x86_64__)
#error "src/compat/libunwind/libunwind.h describes x86-64 only; install libunwind's headers"
#endif

typedef uint64_t unw_word_t;
typedef int unw_regnum_t;
typedef struct unw_addr_space* unw_addr_space_t;
typedef struct unw_cursor {
  unw_word_t opaque[127];  // UNW_TDEP_CURSOR_LEN
} unw_cursor_t;
typedef ucontext_t unw_context_t;
typedef struct unw_proc_info unw_proc_info_t;
typedef struct unw_dyn_info unw_dyn_info_t;
typedef struct unw_fpreg {
  long double value;
} unw_fpreg_t;

enum { UNW_REG_IP = 16, UNW_REG_SP = 7 };  // UNW_X86_64_RIP, UNW_X86_64_RSP

typedef struct unw_accessors {
  int (*find_proc_info)(unw_addr_space_t, unw_word_t, unw_proc_info_t*, int, void*);
  void (*put_unwind_info)(unw_addr_space_t, unw_proc_info_t*, void*);
  int (*get_dyn_info_list_addr)(unw_addr_space_t, unw_word_t*, void*);
  int (*access_mem)(unw_addr_space_t, unw_word_t, unw_word_t*, int, void*);
  int (*access_reg)(unw_addr_space_t, unw_regnum_t, unw_word_t*, int, void*);
  int (*access_fpreg)(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*);
  int (*resume)(unw_addr_space_t, unw_cursor_t*, void*);
  int (*get_proc_name)(unw_addr_space_t, unw_word_t, char*, size_t, unw_word_t*, void*);
} unw_accessors_t;

// The exported names behind libunwind's macros (UNW_OBJ / UNW_ARCH_OBJ with UNW_LOCAL_ONLY).
#define unw_tdep_getcontext _Ux86_64_getcontext
#define unw_init_local _ULx86_64_init_local
#define unw_step _ULx86_64_step
#define unw_get_reg _ULx86_64_get_reg
#define unw_is_signal_frame _ULx86_64_is_signal_frame
#define unw_get_accessors _Ux86_64_get_accessors
#define unw_local_addr_space _ULx86_64_local_addr_space
