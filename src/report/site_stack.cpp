#include "report/site_stack.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <new>

// The stack switch is x86-64 assembly; sanitizer builds keep the recording where it is (ASan and TSan
// follow the thread's stack).
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define APPENDGUARD_SITE_STACK 1
#endif

namespace appendguard {

__attribute__((tls_model("initial-exec"))) constinit thread_local SiteChains* t_site_chains = nullptr;

namespace {

// The recording's frame (libunwind's context and cursor, about 2 KiB, and the frames found), a first
// unwind of a frame (its DWARF lookup: dl_iterate_phdr and libunwind's parser, a few KiB), and the loading
// of libunwind (dlopen). A signal handler that interrupts the recording runs here too, below it: the rest
// of the space is for it.
constexpr size_t kGuardBytes = 4096;
constexpr size_t kStackBytes = size_t{60} * 1024;
// Above the stack: the thread's remembered open sites (report/site_chains.h).
constexpr size_t kChainsBytes = (sizeof(SiteChains) + 4095) / 4096 * 4096;
constexpr size_t kMappingBytes = kGuardBytes + kStackBytes + kChainsBytes;

__attribute__((tls_model("initial-exec"))) constinit thread_local char* t_stack = nullptr;
#ifdef APPENDGUARD_SITE_STACK
__attribute__((tls_model("initial-exec"))) constinit thread_local bool t_on_stack = false;
#endif
pthread_key_t g_key;
bool g_key_made = false;
int (*g_setspecific)(pthread_key_t, const void*) = nullptr;

SiteChains* chains_in(char* mapping) {
  return reinterpret_cast<SiteChains*>(mapping + kGuardBytes + kStackBytes);
}

void thread_exits(void* p) {
  if (p == t_stack) {
    t_stack = nullptr;
    t_site_chains = nullptr;
  }
  if (p) munmap(p, kMappingBytes);
}

char* thread_mapping() {
  if (__builtin_expect(t_stack != nullptr, 1)) return t_stack;
  void* p = mmap(nullptr, kMappingBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* mapped = static_cast<char*>(p);
  mprotect(mapped, kGuardBytes, PROT_NONE);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (t_stack) {  // a signal handler mapped one meanwhile
    munmap(mapped, kMappingBytes);
    return t_stack;
  }
  new (mapped + kGuardBytes + kStackBytes) SiteChains;
  t_stack = mapped;
  t_site_chains = chains_in(mapped);
  if (g_key_made) g_setspecific(g_key, mapped);
  return mapped;
}

}  // namespace

}  // namespace appendguard

#ifdef APPENDGUARD_SITE_STACK
// fn(arg) with %rsp at stack_top (16-aligned). An ordinary frame-pointer frame for the unwinders (the
// canonical address of the frame is %rbp + 16 wherever %rsp is), so that stepping out of it lands in
// the caller's frame on the thread's own stack.
extern "C" __attribute__((visibility("hidden"))) void appendguard_call_on_stack(void* arg, void (*fn)(void*),
                                                                                void* stack_top);
asm(R"(
  .text
  .p2align 4
  .globl appendguard_call_on_stack
  .hidden appendguard_call_on_stack
  .type appendguard_call_on_stack, @function
appendguard_call_on_stack:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  movq %rsp, %rbp
  .cfi_def_cfa_register %rbp
  movq %rdx, %rsp
  callq *%rsi
  movq %rbp, %rsp
  popq %rbp
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_endproc
  .size appendguard_call_on_stack, .-appendguard_call_on_stack
)");
#endif

namespace appendguard {

void init_site_stack() {
  if (g_key_made) return;
  using KeyCreate = int (*)(pthread_key_t*, void (*)(void*));
  auto key_create = reinterpret_cast<KeyCreate>(dlsym(RTLD_DEFAULT, "pthread_key_create"));
  g_setspecific = reinterpret_cast<decltype(g_setspecific)>(dlsym(RTLD_DEFAULT, "pthread_setspecific"));
  g_key_made = key_create && g_setspecific && key_create(&g_key, thread_exits) == 0;
}

void run_on_site_stack(void (*fn)(void*), void* arg) {
#ifdef APPENDGUARD_SITE_STACK
  char* stack = t_on_stack ? nullptr : thread_mapping();
  if (stack) {
    t_on_stack = true;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    appendguard_call_on_stack(arg, fn, stack + kGuardBytes + kStackBytes);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t_on_stack = false;
    return;
  }
#endif
  fn(arg);
}

SiteChains* map_thread_site_chains() {
  char* mapping = thread_mapping();
  return mapping ? chains_in(mapping) : nullptr;
}

}  // namespace appendguard
