#include "shim/trace.h"

#include <stdarg.h>

#include <cstdio>

#include "report/report.h"

namespace appendguard {

// ---------------------------------------------------------------- tracing

void trace(const char* operation, int fd, const char* path, long long result, int error, const char* format,
           ...) {
  InternalScope internal;
  char detail[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(detail, sizeof detail, format, args);
  va_end(args);
  TraceEvent e;
  e.operation = operation;
  e.fd = fd;
  e.path = path;
  e.detail = detail;
  e.result = result;
  e.error = error;
  report_trace(e);
}

}  // namespace appendguard
