#include "shim/path_scratch.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>

#include <atomic>

namespace appendguard {

__attribute__((tls_model("initial-exec"))) constinit thread_local char* t_path_buffers = nullptr;
__attribute__((tls_model("initial-exec"))) constinit thread_local size_t t_path_slots_used = 0;

namespace {

constexpr size_t kMappingBytes = kPathSlots * kMaxPath;

pthread_key_t g_key;
bool g_key_made = false;
int (*g_setspecific)(pthread_key_t, const void*) = nullptr;

char* map_buffers(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

void thread_exits(void* p) {
  if (p == t_path_buffers) t_path_buffers = nullptr;
  if (p) munmap(p, kMappingBytes);
}

// This thread's buffers, mapped at the first call. A signal handler that maps them while this call was
// mapping them wins: ours is given back.
char* thread_buffers() {
  if (__builtin_expect(t_path_buffers != nullptr, 1)) return t_path_buffers;
  char* mapped = map_buffers(kMappingBytes);
  if (!mapped) return nullptr;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (t_path_buffers) {
    munmap(mapped, kMappingBytes);
    return t_path_buffers;
  }
  t_path_buffers = mapped;
  if (g_key_made) g_setspecific(g_key, mapped);
  return mapped;
}

}  // namespace

void init_path_scratch() {
  if (g_key_made) return;
  using KeyCreate = int (*)(pthread_key_t*, void (*)(void*));
  auto key_create = reinterpret_cast<KeyCreate>(dlsym(RTLD_DEFAULT, "pthread_key_create"));
  g_setspecific = reinterpret_cast<decltype(g_setspecific)>(dlsym(RTLD_DEFAULT, "pthread_setspecific"));
  g_key_made = key_create && g_setspecific && key_create(&g_key, thread_exits) == 0;
}

// Leases are strictly nested (a signal handler's ends before the code it interrupted resumes), so the
// slots in use are a stack: t_path_slots_used is read and written back by the same lease, and a handler that
// ran in between has restored it. The thread's first lease (its buffers mapped), or one nested deeper than
// the slots.
void PathLease::lease_slowly(size_t used, size_t count) {
  if (used + count <= kPathSlots) {
    char* buffers = thread_buffers();
    if (!buffers) return;
    base_ = buffers + used * kMaxPath;
    t_path_slots_used = used + count;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    return;
  }
  base_ = map_buffers(count * kMaxPath);
  owned_ = base_ != nullptr;
}

void PathLease::unmap_owned() {
  munmap(base_, count_ * kMaxPath);
}

}  // namespace appendguard
