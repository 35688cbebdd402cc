// Trace mode (APPENDGUARD_TRACE=1): one line per operation on a guarded file.
#pragma once

#include "shim/runtime.h"

namespace appendguard {

inline bool tracing() {
  return g_config->trace;
}  // only called once the library is enabled
void trace(const char* operation, int fd, const char* path, long long result, int error, const char* format,
           ...) __attribute__((format(printf, 6, 7)));

}  // namespace appendguard
