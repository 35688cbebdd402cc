// Trace mode (APPENDGUARD_TRACE=1): one line per operation on a guarded file.
#pragma once

#include <cstddef>
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
template <size_t N>
TraceNumber trace_unsigned(const char (&name)[N], unsigned long long value) {
  return {name, N - 1, value, false};
}
template <size_t N>
TraceNumber trace_signed(const char (&name)[N], long long value) {
  return {name, N - 1, static_cast<unsigned long long>(value), true};
}

}  // namespace appendguard
