// What happens to a call that breaks the append-only rule: decided from the configuration and the kind
// of violation alone (pure; unit-tested as a table in tests/unit/test_violation_outcome.cpp). The shim
// builds the report and carries the response out in one place (shim/violation.cpp).
#pragma once

#include "core/config.h"

namespace appendguard {

enum class Outcome {
  kRefused,        // the call failed with `error`, nothing reached the file
  kAborted,        // abort() follows the report
  kLetThrough,     // enforce + warn: the call went on; bytes land at `landing_offset`
  kAuditOnly,      // audit mode: nothing changed; the call would fail on an append-only mount
  kKernelRefuses,  // the kernel itself fails the call (read of a write-only handle, shared mapping)
};

enum class ViolationKind {
  kPreventable,  // the library can still stop the call: APPENDGUARD_ON_VIOLATION decides
  kUnplaceable,  // the call cannot be carried out correctly whatever the setting (a signal handler
                 // writing into the write it interrupted): refused, in every mode
  kObserved,     // the kernel carries the call out or fails it by itself (a read of a handle made
                 // write-only, a shared writable mapping): reported with what the kernel did
};

struct ViolationResponse {
  Outcome outcome = Outcome::kRefused;
  int error = 0;               // the errno reported (and set, when fail_call)
  bool fail_call = false;      // the hook returns the failure without making the call
  bool abort_process = false;  // abort() after the report
};

// `kernel_error`: for kObserved, the call's errno (0 when it succeeded).
ViolationResponse respond_to_violation(Mode mode, Action on_violation, int violation_errno,
                                       ViolationKind kind, int kernel_error = 0);

}  // namespace appendguard
