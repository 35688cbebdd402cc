#include "report/trace_buffer.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <new>

namespace appendguard {
namespace {

static_assert(sizeof(TraceBlock) <= kTraceBlockBytes);

TraceWriter g_writer = nullptr;
bool g_json = false;
constinit std::atomic<TraceBlock*> g_blocks{nullptr};
constinit std::atomic<bool> g_stopped{false};  // after the exit flush: lines are written one by one
pthread_key_t g_key;
bool g_key_made = false;
// Found at run time: they moved from libpthread into libc in glibc 2.34, and the library must not need
// a newer glibc than 2.17 (docs/design.md, "glibc floor").
int (*g_setspecific)(pthread_key_t, const void*) = nullptr;

__attribute__((tls_model("initial-exec"))) constinit thread_local TraceBlock* t_block = nullptr;
__attribute__((tls_model("initial-exec"))) constinit thread_local bool t_exited = false;

pid_t raw_gettid() {
  return static_cast<pid_t>(syscall(SYS_gettid));
}

void make_prefix(TraceBlock* b) {
  b->prefix_size = format_trace_prefix(b->prefix, sizeof b->prefix, static_cast<pid_t>(syscall(SYS_getpid)),
                                       b->tid, g_json);
  b->head_size = 0;
}

// `e`'s line into `out`: its head copied when it is the last line's (same operation, descriptor and path
// text), else formatted and kept.
void append_line(TraceBlock* b, FastText& out, const TraceEvent& e) {
  std::string_view path = e.path;
  if (b->head_size != 0 && e.operation == b->head_operation && e.fd == b->head_fd &&
      path.size() == b->head_path_size && std::memcmp(path.data(), b->head_path, path.size()) == 0) {
    out.text({b->head, b->head_size});
  } else {
    size_t start = out.size();
    append_trace_head(out, {b->prefix, b->prefix_size}, e, path, g_json);
    size_t size = out.size() - start;
    b->head_size = 0;
    if (!out.overflowed() && path.size() <= sizeof b->head_path && size <= sizeof b->head) {
      std::memcpy(b->head, out.view().data() + start, size);
      std::memcpy(b->head_path, path.data(), path.size());
      b->head_operation = e.operation;
      b->head_fd = e.fd;
      b->head_path_size = path.size();
      b->head_size = size;
    }
  }
  append_trace_tail(out, e, g_json);
}

// Writes out the block's lines; its holder is this thread. They stay when the writer cannot take them now.
void write_out(TraceBlock* b) {
  if (b->size == 0 || !g_writer) return;
  if (g_writer({b->data, b->size})) b->size = 0;
}

void release(TraceBlock* b) {
  b->holder.store(0, std::memory_order_release);
}

// Takes a block another thread may hold, waiting up to about `wait_ms`. False: not taken (held by this
// thread, which a signal handler interrupted, or for too long by another).
bool take(TraceBlock* b, pid_t self, int wait_ms) {
  struct timespec start = {};
  for (int round = 0;; ++round) {
    pid_t expected = 0;
    if (b->holder.compare_exchange_strong(expected, self, std::memory_order_acquire)) return true;
    if (expected == self) return false;
    if (round == 0) clock_gettime(CLOCK_MONOTONIC, &start);
    if (round % 64 == 63) {
      struct timespec now = {};
      clock_gettime(CLOCK_MONOTONIC, &now);
      long long ms = (now.tv_sec - start.tv_sec) * 1000LL + (now.tv_nsec - start.tv_nsec) / 1000000;
      if (ms >= wait_ms) return false;
    }
    sched_yield();
  }
}

void thread_exits(void* p) {
  auto* b = static_cast<TraceBlock*>(p);
  if (take(b, b->tid, 1000)) {
    write_out(b);
    b->size = 0;
    release(b);
  }
  b->free.store(true, std::memory_order_release);
  if (t_block == b) t_block = nullptr;
  t_exited = true;  // a line from a later destructor of this thread is written directly
}

TraceBlock* claim_block() {
  for (TraceBlock* b = g_blocks.load(std::memory_order_acquire); b; b = b->next) {
    bool expected = true;
    if (b->free.load(std::memory_order_relaxed) &&
        b->free.compare_exchange_strong(expected, false, std::memory_order_acquire)) {
      return b;
    }
  }
  // Through libc (and so through a sanitizer's interceptor); an anonymous mapping takes our mmap hook's
  // untracked path. Never unmapped: a block outlives its thread for the next one.
  void* p = mmap(nullptr, kTraceBlockBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* b = new (p) TraceBlock;
  TraceBlock* head = g_blocks.load(std::memory_order_relaxed);
  do {
    b->next = head;
  } while (!g_blocks.compare_exchange_weak(head, b, std::memory_order_release, std::memory_order_relaxed));
  return b;
}

TraceBlock* own_block() {
  if (t_block || t_exited) return t_block;
  TraceBlock* b = claim_block();
  if (!b) return nullptr;
  b->tid = raw_gettid();  // its size is 0: a new block, or written out when its thread exited
  make_prefix(b);
  t_block = b;
  if (g_key_made) g_setspecific(g_key, b);
  return b;
}

}  // namespace

void configure_trace_buffers(TraceWriter writer, bool json) {
  g_writer = writer;
  g_json = json;
  if (g_key_made) return;
  using KeyCreate = int (*)(pthread_key_t*, void (*)(void*));
  auto key_create = reinterpret_cast<KeyCreate>(dlsym(RTLD_DEFAULT, "pthread_key_create"));
  g_setspecific = reinterpret_cast<decltype(g_setspecific)>(dlsym(RTLD_DEFAULT, "pthread_setspecific"));
  g_key_made = key_create && g_setspecific && key_create(&g_key, thread_exits) == 0;
}

TraceOutcome buffer_trace(const TraceEvent& e, bool flush_point) {
  if (!g_writer || g_stopped.load(std::memory_order_relaxed)) return TraceOutcome::kWriteDirectly;
  TraceBlock* b = own_block();
  if (!b) return TraceOutcome::kWriteDirectly;
  pid_t expected = 0;
  if (!b->holder.compare_exchange_strong(expected, b->tid, std::memory_order_acquire)) {
    // This thread's own append, interrupted by the signal handler we are in: not into the block. Else
    // another thread is writing this block out: wait for it (briefly).
    if (expected == b->tid || !take(b, b->tid, 1000)) return TraceOutcome::kWriteDirectly;
  }
  if (g_stopped.load(std::memory_order_relaxed)) {  // the exit flush went by before we took the block
    write_out(b);
    release(b);
    return TraceOutcome::kWriteDirectly;
  }
  // Formatted into the free space; if it does not fit there, again after writing the block out.
  for (int attempt = 0; attempt < 2; ++attempt) {
    FastText out(b->data + b->size, sizeof b->data - b->size);
    append_line(b, out, e);
    if (!out.overflowed()) {
      b->size += out.size();
      if (flush_point) write_out(b);
      release(b);
      return TraceOutcome::kBuffered;
    }
    if (b->size == 0) break;  // a line longer than a block
    write_out(b);
    if (b->size != 0) break;  // the log cannot be written now (a report of this thread)
  }
  release(b);
  return TraceOutcome::kWriteDirectly;
}

void flush_own_trace() {
  TraceBlock* b = t_block;
  if (!b || !take(b, b->tid, 1000)) return;
  write_out(b);
  release(b);
}

void flush_every_trace(int wait_ms) {
  TraceBlock* head = g_blocks.load(std::memory_order_acquire);
  if (!head) return;
  pid_t self = t_block ? t_block->tid : raw_gettid();
  for (TraceBlock* b = head; b; b = b->next) {
    if (!take(b, self, wait_ms)) continue;
    write_out(b);
    release(b);
  }
}

void stop_trace_buffering() {
  g_stopped.store(true, std::memory_order_seq_cst);
  flush_every_trace(1000);
}

void trace_buffers_after_fork_child() {
  for (TraceBlock* b = g_blocks.load(std::memory_order_acquire); b; b = b->next) {
    b->size = 0;
    b->holder.store(0, std::memory_order_relaxed);
    if (b == t_block) {
      b->tid = raw_gettid();
      make_prefix(b);
    } else {
      b->free.store(true, std::memory_order_relaxed);
    }
  }
}

bool is_trace_flush_point(const char* operation) {
  if (operation[0] != 'c' && operation[0] != 'f') return false;  // write, pwrite64, lseek64...: at once
  for (const char* name : {"close", "fclose", "fsync", "fdatasync", "close_range", "closefrom"}) {
    if (std::strcmp(operation, name) == 0) return true;
  }
  return false;
}

}  // namespace appendguard
