// What src/report/backtrace.cpp relies on in libunwind.h, gathered from the real header and from
// src/compat/libunwind/libunwind.h, so that test_libunwind_abi.cpp can compare them.
#pragma once

#include <cstddef>
#include <string>

namespace appendguard::test {

struct UnwindAbiFacts {
  size_t cursor_size, context_size, accessors_size, get_proc_name_offset;
  int reg_ip;
  std::string names;  // the symbol names behind the seven macros, space-separated
};

UnwindAbiFacts system_libunwind_facts();
UnwindAbiFacts vendored_libunwind_facts();

}  // namespace appendguard::test
