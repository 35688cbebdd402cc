// Per-thread scratch memory for the report path, so that a report needs little stack (a thread with a
// 16 KiB stack, a signal handler on an 8 KiB sigaltstack): mapped with mmap on a thread's first report
// (no malloc: reports run in signal handlers), reused by its later reports, unmapped when the thread exits.
// A report nested in another on the same thread (a signal handler's) gets a mapping of its own.
#pragma once

#include <cstddef>

#include "report/backtrace.h"

namespace appendguard {

struct ReportScratch {
  CapturedStack stack;
  alignas(64) unsigned char unwind[4096];  // libunwind's context and cursor (backtrace.cpp checks the size)
  char python_text[8192];
};

// Creates the key whose destructor unmaps a thread's scratch. Call once, outside signal handlers.
void init_report_scratch();

// A scratch for this report, or null if memory is exhausted; give it back with release_report_scratch.
class ScratchLease {
 public:
  ScratchLease();
  ~ScratchLease();
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  ReportScratch* get() const { return scratch_; }

 private:
  ReportScratch* scratch_ = nullptr;
  bool owned_ = false;  // a nested report's own mapping, unmapped at the end
};

}  // namespace appendguard
