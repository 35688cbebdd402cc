#include "report/scratch.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

namespace appendguard {
namespace {

__attribute__((tls_model("initial-exec"))) constinit thread_local ReportScratch* t_scratch = nullptr;
__attribute__((tls_model("initial-exec"))) constinit thread_local bool t_scratch_busy = false;
pthread_key_t g_key;
bool g_key_made = false;
// Found at run time: they moved from libpthread into libc in glibc 2.34, and the library must not need
// a newer glibc than 2.17 (docs/design.md, "glibc floor").
int (*g_setspecific)(pthread_key_t, const void*) = nullptr;

ReportScratch* map_scratch() {
  // Through libc (and so through a sanitizer's interceptor, which must see a mapping reused after an
  // unmap by another thread); an anonymous mapping takes our mmap hook's untracked path.
  void* p = mmap(nullptr, sizeof(ReportScratch), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) ReportScratch;
}

void unmap_scratch(void* p) {
  if (p) munmap(p, sizeof(ReportScratch));
}

// At thread exit: a report from a later destructor on this thread maps a new one.
void thread_exits(void* p) {
  if (p == t_scratch) t_scratch = nullptr;
  unmap_scratch(p);
}

}  // namespace

void init_report_scratch() {
  if (g_key_made) return;
  using KeyCreate = int (*)(pthread_key_t*, void (*)(void*));
  auto key_create = reinterpret_cast<KeyCreate>(dlsym(RTLD_DEFAULT, "pthread_key_create"));
  g_setspecific = reinterpret_cast<decltype(g_setspecific)>(dlsym(RTLD_DEFAULT, "pthread_setspecific"));
  g_key_made = key_create && g_setspecific && key_create(&g_key, thread_exits) == 0;
}

ScratchLease::ScratchLease() {
  if (t_scratch_busy) {
    scratch_ = map_scratch();
    owned_ = true;
    return;
  }
  if (!t_scratch) {
    t_scratch = map_scratch();
    if (t_scratch && g_key_made) g_setspecific(g_key, t_scratch);
  }
  scratch_ = t_scratch;
  t_scratch_busy = scratch_ != nullptr;
}

ScratchLease::~ScratchLease() {
  if (owned_) {
    unmap_scratch(scratch_);
  } else if (scratch_) {
    t_scratch_busy = false;
  }
}

}  // namespace appendguard
