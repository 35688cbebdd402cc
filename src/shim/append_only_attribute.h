// A write open of a file the library does not guard failed with EPERM: if the file carries the kernel's
// append-only attribute (chattr +a, FS_APPEND_FL), the kernel refused the open because it truncates or
// does not append. Only the failure path looks: the open path of every other file is unchanged.
#pragma once

#include "shim/guard_open.h"

namespace appendguard {

// Whether the file at `path` (relative to `dirfd`) has the append-only attribute.
bool has_append_only_attribute(int dirfd, const char* path);

// One line: the kernel's append-only attribute on `path` refused `call` (`what`: the open's flags, a
// truncation's length). The message is leased (shim/path_scratch.h), not on the caller's stack.
void say_append_only_refusal(const char* call, const char* path, const char* what);

// The open `request` (unguarded, its real call failed with EPERM) is of an append-only file: true when it
// is to be opened again as a guarded file (`decision` filled: O_RDWR or O_WRONLY become O_WRONLY|O_APPEND,
// which the kernel takes on such a file); false otherwise, having said why the file cannot be opened so
// when it has the attribute (once per file). Leaves errno = EPERM.
[[gnu::cold, gnu::noinline]] bool decide_append_only_retry(const OpenRequest& request,
                                                           OpenDecision& decision);

}  // namespace appendguard
