// The program's memory as the kernel reads it for a trapped system call: a bad pointer is EFAULT, never a
// fault in the library. Copies go through process_vm_readv/process_vm_writev on this process (a page
// that is not mapped, or not readable or writable, fails the copy); where those calls are refused
// (seccomp), the memory is touched directly, as before.
#pragma once

#include <stddef.h>

namespace appendguard {

// n bytes from the program's `from` into `to`; false when some of them cannot be read.
bool copy_from_program(void* to, const void* from, size_t n);
// n bytes into the program's `to`; false when some of them cannot be written.
bool copy_to_program(void* to, const void* from, size_t n);
// 0 when `path` is a readable string of at most 4096 bytes with its NUL, else the kernel's -errno
// (-EFAULT; -ENAMETOOLONG when no NUL is found within 4096 bytes).
long check_program_string(const char* path);

}  // namespace appendguard
