#include "core/violation_outcome.h"

#include <errno.h>

#include <catch2/catch.hpp>

using namespace appendguard;

namespace {

struct Row {
  Mode mode;
  Action action;
  ViolationKind kind;
  int kernel_error;
  Outcome outcome;
  int error;
  bool fail_call;
  bool abort_process;
};

constexpr int kSetting = EOPNOTSUPP;  // APPENDGUARD_ERRNO

// Every mode, setting and kind, with what the hook must do.
const Row kTable[] = {
    {Mode::kEnforce, Action::kError, ViolationKind::kPreventable, 0, Outcome::kRefused, kSetting, true,
     false},
    {Mode::kEnforce, Action::kAbort, ViolationKind::kPreventable, 0, Outcome::kAborted, kSetting, false,
     true},
    {Mode::kEnforce, Action::kWarn, ViolationKind::kPreventable, 0, Outcome::kLetThrough, kSetting, false,
     false},
    {Mode::kAudit, Action::kError, ViolationKind::kPreventable, 0, Outcome::kAuditOnly, kSetting, false,
     false},
    {Mode::kAudit, Action::kWarn, ViolationKind::kPreventable, 0, Outcome::kAuditOnly, kSetting, false,
     false},
    {Mode::kAudit, Action::kAbort, ViolationKind::kPreventable, 0, Outcome::kAborted, kSetting, false, true},
    // A write that cannot be placed is refused whatever the setting, and never aborts.
    {Mode::kEnforce, Action::kWarn, ViolationKind::kUnplaceable, 0, Outcome::kRefused, kSetting, true, false},
    {Mode::kEnforce, Action::kAbort, ViolationKind::kUnplaceable, 0, Outcome::kRefused, kSetting, true,
     false},
    {Mode::kAudit, Action::kError, ViolationKind::kUnplaceable, 0, Outcome::kRefused, kSetting, true, false},
    // What the kernel did is reported as such; the setting changes nothing.
    {Mode::kEnforce, Action::kError, ViolationKind::kObserved, EBADF, Outcome::kKernelRefuses, EBADF, false,
     false},
    {Mode::kEnforce, Action::kAbort, ViolationKind::kObserved, 0, Outcome::kLetThrough, 0, false, false},
    {Mode::kAudit, Action::kError, ViolationKind::kObserved, 0, Outcome::kAuditOnly, 0, false, false},
    {Mode::kAudit, Action::kAbort, ViolationKind::kObserved, EACCES, Outcome::kAuditOnly, EACCES, false,
     false},
};

}  // namespace

TEST_CASE("the response to a violation follows the mode, the setting and the kind") {
  for (const Row& row : kTable) {
    CAPTURE(static_cast<int>(row.mode), static_cast<int>(row.action), static_cast<int>(row.kind),
            row.kernel_error);
    ViolationResponse r = respond_to_violation(row.mode, row.action, kSetting, row.kind, row.kernel_error);
    CHECK(r.outcome == row.outcome);
    CHECK(r.error == row.error);
    CHECK(r.fail_call == row.fail_call);
    CHECK(r.abort_process == row.abort_process);
  }
}

TEST_CASE("a refused call carries the configured errno") {
  ViolationResponse r =
      respond_to_violation(Mode::kEnforce, Action::kError, EPERM, ViolationKind::kPreventable);
  CHECK(r.error == EPERM);
  CHECK(r.fail_call);
}
