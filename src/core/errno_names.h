// The symbolic name of every Linux errno value, as glibc 2.32's strerrorname_np gives it. glibc 2.17
// (the library's floor, docs/design.md) has no such function, so the table is ours.
#pragma once

namespace appendguard {

// "EPERM" for EPERM, ...; "0" for 0; nullptr for a value Linux does not define.
const char* linux_errno_name(int err);

}  // namespace appendguard
