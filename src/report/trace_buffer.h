// Trace lines buffered per thread and written to the log in batches (APPENDGUARD_TRACE=1), so that a trace
// costs a little formatting, not system calls: one write(2) per block of lines.
//
// Each thread that traces gets a block (mapped on its first line, reused after the thread exits) holding
// its lines in order. A block is written out when the next line would not fit, after a line that is a
// flush point (close, fclose, fsync, fdatasync of a guarded file: TraceEvent's caller says so), when the
// thread exits (a pthread key's destructor), and for every thread's block before a violation report,
// before exec and at exit. After the exit flush, lines are written one by one.
//
// A block's `holder` is the thread id of the thread appending to it or writing it out (0: none). A line
// from a signal handler that interrupted its own thread's append finds its own id there and is written
// directly instead (see TraceOutcome), so the block is never corrupted; such a line can then come before
// lines of its thread that were still buffered. Writing another thread's block waits a bounded time for
// it; the report paths allocate nothing (blocks are mmap'ed, never malloc'ed).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <string_view>

#include "report/report.h"
#include "report/trace_format.h"

namespace appendguard {

// Writes a batch to the log; false when it cannot now (this thread is writing a report: the batch stays).
using TraceWriter = bool (*)(std::string_view text);

constexpr size_t kTraceBlockBytes = size_t{16} * 1024;
constexpr size_t kTraceHeadPath = 256;  // longer paths are formatted each time
constexpr size_t kTraceHeadCapacity = 1024;

struct TraceBlock {
  std::atomic<pid_t> holder{0};
  std::atomic<bool> free{false};  // its thread exited: the next new thread takes it
  TraceBlock* next = nullptr;     // the registry: a list of every block, only ever pushed onto
  pid_t tid = 0;
  size_t size = 0;
  size_t prefix_size = 0;
  char prefix[kTracePrefixCapacity] = {};
  // The head of the last line (prefix, operation, fd, path: append_trace_head), for the next line of the
  // same operation, descriptor and path text (a write after a write): copied, not formatted again.
  const char* head_operation = nullptr;
  int head_fd = -1;
  size_t head_path_size = 0;
  size_t head_size = 0;  // 0: none
  char head_path[kTraceHeadPath] = {};
  char head[kTraceHeadCapacity] = {};
  char data[kTraceBlockBytes - kTraceHeadPath - kTraceHeadCapacity - 256] = {};
};

enum class TraceOutcome {
  kBuffered,       // in the block (and written out, if it was a flush point or the block was full)
  kWriteDirectly,  // not buffered: the caller writes the line itself (see above), in order
};

// Once, at start-up (not thread-safe): where batches go and which format the lines are in.
void configure_trace_buffers(TraceWriter writer, bool json);
TraceOutcome buffer_trace(const TraceEvent& e, bool flush_point);
// This thread's block, or every block (waiting at most about `wait_ms` for one another thread holds).
void flush_own_trace();
void flush_every_trace(int wait_ms = 50);
// At exit: every block written, and from then on buffer_trace answers kWriteDirectly.
void stop_trace_buffering();
// In the child of fork(): no block keeps the parent's lines (they are the parent's to write), the blocks
// of threads that do not exist here are free, and this thread's lines carry its new pid and tid.
void trace_buffers_after_fork_child();

// Whether a trace of `operation` is a flush point (close, fclose, fsync, fdatasync, close_range, closefrom).
bool is_trace_flush_point(const char* operation);

}  // namespace appendguard
