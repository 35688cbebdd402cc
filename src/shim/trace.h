// Trace mode (APPENDGUARD_TRACE=1): one line per operation on a guarded file.
#pragma once

#include <initializer_list>

#include "report/report.h"
#include "shim/runtime.h"

namespace appendguard {

inline bool tracing() {
  return g_config->trace;
}  // only called once the library is enabled
void trace(const char* operation, int fd, const char* path, long long result, int error, const char* format,
           ...) __attribute__((format(printf, 6, 7)));
// The same with a detail of numbers ("bytes=64 offset=0 ...", then `suffix`): for write and seek lines,
// without printf. Lines are buffered per thread (report/trace_buffer.h).
void trace_numbers(const char* operation, int fd, const char* path, long long result, int error,
                   std::initializer_list<TraceNumber> numbers, const char* suffix = "");
inline TraceNumber trace_unsigned(const char* name, unsigned long long value) {
  return {name, value, false};
}
inline TraceNumber trace_signed(const char* name, long long value) {
  return {name, static_cast<unsigned long long>(value), true};
}

}  // namespace appendguard
