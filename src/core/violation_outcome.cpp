#include "core/violation_outcome.h"

namespace appendguard {

ViolationResponse respond_to_violation(Mode mode, Action on_violation, int violation_errno,
                                       ViolationKind kind, int kernel_error) {
  ViolationResponse r;
  const bool audit = mode == Mode::kAudit;
  switch (kind) {
    case ViolationKind::kUnplaceable:
      r.outcome = Outcome::kRefused;
      r.error = violation_errno;
      r.fail_call = true;
      return r;
    case ViolationKind::kObserved:
      r.outcome = audit               ? Outcome::kAuditOnly
                  : kernel_error != 0 ? Outcome::kKernelRefuses
                                      : Outcome::kLetThrough;
      r.error = kernel_error;
      return r;
    case ViolationKind::kPreventable:
      break;
  }
  r.error = violation_errno;
  r.abort_process = on_violation == Action::kAbort;
  if (r.abort_process) {
    r.outcome = Outcome::kAborted;
  } else if (audit) {
    r.outcome = Outcome::kAuditOnly;
  } else if (on_violation == Action::kError) {
    r.outcome = Outcome::kRefused;
    r.fail_call = true;
  } else {
    r.outcome = Outcome::kLetThrough;
  }
  return r;
}

}  // namespace appendguard
