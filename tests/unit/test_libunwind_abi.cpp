#include <catch2/catch.hpp>

#include "libunwind_abi/abi_facts.h"

using namespace appendguard::test;

// Builds without libunwind's headers use src/compat/libunwind/libunwind.h; it must describe the same
// libunwind.so.8 the library dlopens.
TEST_CASE("the vendored libunwind declarations match the real header") {
  UnwindAbiFacts real = system_libunwind_facts();
  UnwindAbiFacts ours = vendored_libunwind_facts();
  CHECK(ours.cursor_size == real.cursor_size);
  CHECK(ours.context_size == real.context_size);
  CHECK(ours.accessors_size == real.accessors_size);
  CHECK(ours.get_proc_name_offset == real.get_proc_name_offset);
  CHECK(ours.reg_ip == real.reg_ip);
  CHECK(ours.names == real.names);
}
