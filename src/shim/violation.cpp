#include "shim/violation.h"

#include <errno.h>
#include <stdlib.h>

#include "shim/runtime.h"

namespace appendguard {

Violation violation_on(const char* operation, int fd, const Description* d, uint64_t end_of_file,
                       const char* why) {
  Violation v = violation_at_path(operation, d->path, end_of_file, why);
  v.fd = fd;
  v.description = d;
  return v;
}

Violation violation_at_path(const char* operation, const char* path, uint64_t end_of_file, const char* why) {
  Violation v;
  v.operation = operation;
  v.path = path;
  v.has_count = false;
  v.has_offset = false;
  v.end_of_file = end_of_file;
  v.why = why;
  return v;
}

bool raise_violation(Violation& v, ViolationKind kind, int kernel_error) {
  ViolationResponse response = respond_to_violation(g_config->mode, g_config->on_violation,
                                                    g_config->violation_errno, kind, kernel_error);
  v.outcome = response.outcome;
  v.error = response.error;
  {
    InternalScope internal;
    report_violation(v);
  }
  if (response.abort_process) abort();
  if (response.fail_call) {
    errno = response.error;
    return false;
  }
  return true;
}

}  // namespace appendguard
