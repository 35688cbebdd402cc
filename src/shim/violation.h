// The one place a violation is built and raised: the report, then what core/violation_outcome.h decides
// for the configuration (refuse with APPENDGUARD_ERRNO, abort, let through, or audit only).
#pragma once

#include <cstdint>

#include "core/violation_outcome.h"
#include "report/report.h"

namespace appendguard {

// A violation on `fd` (tracked as `d`) with no byte count and no offset; callers add what applies
// (Violation::with_count, with_offset).
Violation violation_on(const char* operation, int fd, const Description* d, uint64_t end_of_file,
                       const char* why);
// A violation on a path no descriptor refers to (truncate by name).
Violation violation_at_path(const char* operation, const char* path, uint64_t end_of_file, const char* why);

// Reports `v` and carries out the response to it. Returns true if the call must go on (warn, audit, or a
// call the kernel already made), false if the hook must fail it (errno is then set). `kernel_error`: for
// ViolationKind::kObserved, the call's errno (0 when it succeeded).
bool raise_violation(Violation& v, ViolationKind kind = ViolationKind::kPreventable, int kernel_error = 0);

}  // namespace appendguard
