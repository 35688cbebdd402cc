// Trace lines (APPENDGUARD_TRACE=1) of the hooks: the event handed to report_trace, which buffers it
// per thread (report/trace_buffer.h). Write and seek lines give their numbers as such (trace_numbers):
// no printf on the path of every write.
#include "shim/trace.h"

#include <stdarg.h>
#include <time.h>

#include <cstdio>

#include "report/report.h"

namespace appendguard {

namespace {

// What every trace line has; the caller adds the detail or the numbers.
TraceEvent event_of(const char* operation, int fd, const char* path, long long result, int error) {
  TraceEvent e;
  e.operation = operation;
  e.fd = fd;
  e.path =
      path ? path : "";  // a description recycled under a racing reader reads as zeros (core/page_pool.h)
  e.result = result;
  e.error = error;
  // The time of the line, for `appendguard report --html` (lines of different threads and processes are
  // not in time order in the log): clock_gettime through the vDSO, no system call.
  struct timespec now = {};
  if (clock_gettime(CLOCK_REALTIME, &now) == 0) {
    e.time_us = static_cast<unsigned long long>(now.tv_sec) * 1000000ULL +
                static_cast<unsigned long long>(now.tv_nsec) / 1000ULL;
  }
  return e;
}

}  // namespace

void trace(const char* operation, int fd, const char* path, long long result, int error, const char* format,
           ...) {
  InternalScope internal;
  char detail[512];
  TraceEvent e = event_of(operation, fd, path, result, error);
  va_list args;
  va_start(args, format);
  if (format[0] == '%' && format[1] == 's' && format[2] == '\0') {
    e.detail = va_arg(args, const char*);  // "%s": no formatting
  } else {
    std::vsnprintf(detail, sizeof detail, format, args);
    e.detail = detail;
  }
  va_end(args);
  report_trace(e);
}

void trace_numbers(const char* operation, int fd, const char* path, long long result, int error,
                   std::initializer_list<TraceNumber> numbers, const char* suffix) {
  InternalScope internal;
  TraceEvent e = event_of(operation, fd, path, result, error);
  e.detail = suffix;
  e.numbers = numbers.begin();
  e.number_count = static_cast<int>(numbers.size());
  report_trace(e);
}

}  // namespace appendguard
