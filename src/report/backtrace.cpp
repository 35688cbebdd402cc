#include "report/backtrace.h"
#include "report/escape.h"

#define UNW_LOCAL_ONLY
#include <cxxabi.h>
#include <dlfcn.h>
#include <libunwind.h>
#include <link.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "report/scratch.h"
#include "report/site_stack.h"

namespace appendguard {

constinit std::atomic<bool> g_unwinder_loaded{false};

namespace {

#define APPENDGUARD_STR2(x) #x
#define APPENDGUARD_STR(x) APPENDGUARD_STR2(x)

struct Unwinder {
  int (*getcontext)(unw_context_t*) = nullptr;
  int (*init_local)(unw_cursor_t*, unw_context_t*) = nullptr;
  int (*step)(unw_cursor_t*) = nullptr;
  int (*get_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t*) = nullptr;
  int (*is_signal_frame)(unw_cursor_t*) = nullptr;
  unw_accessors_t* (*get_accessors)(unw_addr_space_t) = nullptr;
  unw_addr_space_t* local_space = nullptr;
};

Unwinder g_unwinder;
// The address ranges of this library (its frames say nothing about the culprit) and of libc (and
// libpthread, separate before glibc 2.34, and a sanitizer runtime's interceptors in the ASan and TSan
// builds: the call the program made, or the thread's start), found once
// at load with dl_iterate_phdr: dladdr, which searches a module's symbols, costs thousands of
// instructions per frame (a seek leaving the end captures its stack).
struct Module {
  uintptr_t low = 0;
  uintptr_t high = 0;
  bool contains(uintptr_t address) const { return address >= low && address < high; }
};
Module g_own;
constexpr int kMaxLibcModules = 4;
Module g_libc[kMaxLibcModules];
int g_libc_count = 0;
// CPython's evaluation loop, _PyEval_EvalFrameDefault (exported by the interpreter, or by a libpython the
// program links), when the process has it at load: found by address, like the modules above.
Module g_python_evaluation;
// Threads inside libunwind now. libunwind takes mutexes of its own; a child forked while another thread
// held one would wait forever at its first unwind, so a child forked during an unwind never unwinds.
std::atomic<int> g_threads_unwinding{0};
std::atomic<bool> g_unwinding_disabled{false};

class UnwindingScope {
 public:
  UnwindingScope() { g_threads_unwinding.fetch_add(1, std::memory_order_acq_rel); }
  ~UnwindingScope() { g_threads_unwinding.fetch_sub(1, std::memory_order_acq_rel); }
  UnwindingScope(const UnwindingScope&) = delete;
  UnwindingScope& operator=(const UnwindingScope&) = delete;
};

template <typename Fn>
bool resolve(void* handle, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(handle, name));
  return out != nullptr;
}

bool starts_with(const char* text, const char* prefix) {
  return std::strncmp(text, prefix, std::strlen(prefix)) == 0;
}

int note_module(dl_phdr_info* info, size_t /*size*/, void* /*data*/) {
  Module m{UINTPTR_MAX, 0};
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_LOAD) continue;
    uintptr_t start = info->dlpi_addr + segment.p_vaddr;
    if (start < m.low) m.low = start;
    if (start + segment.p_memsz > m.high) m.high = start + segment.p_memsz;
  }
  if (m.high == 0) return 0;
  if (m.contains(reinterpret_cast<uintptr_t>(&note_module))) g_own = m;
  const char* module = info->dlpi_name ? info->dlpi_name : "";
  if (const char* slash = std::strrchr(module, '/')) module = slash + 1;
  bool libc = starts_with(module, "libc.so") || starts_with(module, "libc-") ||
              starts_with(module, "libpthread") || starts_with(module, "libasan") ||
              starts_with(module, "libtsan") || starts_with(module, "libubsan");
  if (libc && g_libc_count < kMaxLibcModules) g_libc[g_libc_count++] = m;
  return 0;
}

void find_modules() {
  g_libc_count = 0;
  dl_iterate_phdr(note_module, nullptr);
  void* evaluation = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
  // dladdr1 (for the symbol's size) is looked up at run time: linked, it would be its GLIBC_2.34 version.
  using Dladdr1 = int (*)(const void*, Dl_info*, void**, int);
  auto dladdr1_at_run_time = reinterpret_cast<Dladdr1>(dlsym(RTLD_DEFAULT, "dladdr1"));
  Dl_info info{};
  void* entry = nullptr;
  if (evaluation && dladdr1_at_run_time && dladdr1_at_run_time(evaluation, &info, &entry, RTLD_DL_SYMENT) &&
      entry) {
    auto start = reinterpret_cast<uintptr_t>(evaluation);
    uint64_t size = static_cast<const ElfW(Sym)*>(entry)->st_size;
    if (size > 0) g_python_evaluation = {start, start + size};
  }
}

}  // namespace

namespace {

// libunwind's check of the memory it reads (x86-64 access_mem, validating) writes one byte of that memory
// into a pipe it opened at its start and reads one back, by descriptor number. A program that closes
// descriptors it did not open (closefrom(3), close_range, a daemon's loop) and opens files again hands those
// numbers to its own files: libunwind then read a byte of the program's file and wrote a byte of our memory
// into another, and closed both when a read failed (third adversarial round: "config-line" read back as
// "onfig-line", "\370out" in a file written "out"). Its local address space's access_mem is replaced by
// this one, which uses no descriptor: a page is readable if process_vm_readv can copy one byte of it from
// this process (EFAULT: not readable), or, where that call is refused (seccomp), if mincore finds it mapped
// and resident (a guard page never is). Pages found readable are remembered (direct-mapped, 64), as
// libunwind remembers its last four.
constexpr size_t kCheckedPages = 64;
std::atomic<uintptr_t> g_checked_pages[kCheckedPages];
std::atomic<bool> g_vm_readv_refused{false};

bool page_readable(uintptr_t page) {
  if (page == 0) return false;
  std::atomic<uintptr_t>& slot = g_checked_pages[(page >> 12) % kCheckedPages];
  if (slot.load(std::memory_order_relaxed) == page) return true;
  const int error = errno;
  bool readable = false;
  if (!g_vm_readv_refused.load(std::memory_order_relaxed)) {
    char byte;
    struct iovec local = {&byte, 1};
    struct iovec remote = {reinterpret_cast<void*>(page), 1};
    const long copied = syscall(SYS_process_vm_readv, syscall(SYS_getpid), &local, 1, &remote, 1, 0);
    if (copied == 1 || errno == EFAULT) {
      readable = copied == 1;
    } else {
      g_vm_readv_refused.store(true, std::memory_order_relaxed);
    }
  }
  if (g_vm_readv_refused.load(std::memory_order_relaxed)) {
    unsigned char resident = 0;
    readable = mincore(reinterpret_cast<void*>(page), 1, &resident) == 0 && (resident & 1);
  }
  errno = error;
  if (readable) slot.store(page, std::memory_order_relaxed);
  return readable;
}

int access_mem_without_descriptors(unw_addr_space_t, unw_word_t address, unw_word_t* value, int write,
                                   void*) {
  auto* word = reinterpret_cast<unw_word_t*>(address);
  if (write) {
    *word = *value;
    return 0;
  }
  const uintptr_t page_mask = ~static_cast<uintptr_t>(4095);
  const uintptr_t first = address & page_mask;
  const uintptr_t last = (address + sizeof(unw_word_t) - 1) & page_mask;
  if (!page_readable(first) || (last != first && !page_readable(last))) return -1;
  *value = *word;
  return 0;
}

// libunwind fills its local address space (and opens its pipe) at its first unw_init_local: made here, so
// that the accessor replaced after it stays replaced.
void replace_memory_check(const Unwinder& u) {
  unw_context_t context;
  unw_cursor_t cursor;
  if (u.getcontext(&context) != 0 || u.init_local(&cursor, &context) != 0) return;
  if (unw_accessors_t* accessors = u.get_accessors(*u.local_space))
    accessors->access_mem = access_mem_without_descriptors;
}

// libunwind is loaded when first needed (issue 27: its dlopen, with liblzma's, was most of a new
// process's start-up), once per process: kNotLoaded -> kLoading -> kLoaded or kUnavailable.
enum LoadState : int { kNotLoaded, kLoading, kLoaded, kUnavailable };
constinit std::atomic<int> g_load_state{kNotLoaded};
// This thread is loading it: a signal handler that interrupted the loading does not wait for itself.
__attribute__((tls_model("initial-exec"))) constinit thread_local bool t_loading = false;

// On the site stack (report/site_stack.h): the loader's frames take several KiB.
void load_now(void* p) {
  bool& loaded = *static_cast<bool*>(p);
  void* handle = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!handle) return;
  Unwinder u;
  // Names come from libunwind.h's macros, e.g. unw_step -> _ULx86_64_step.
  bool ok = resolve(handle, APPENDGUARD_STR(unw_tdep_getcontext), u.getcontext);
  ok = ok && resolve(handle, APPENDGUARD_STR(unw_init_local), u.init_local);
  ok = ok && resolve(handle, APPENDGUARD_STR(unw_step), u.step);
  ok = ok && resolve(handle, APPENDGUARD_STR(unw_get_reg), u.get_reg);
  ok = ok && resolve(handle, APPENDGUARD_STR(unw_is_signal_frame), u.is_signal_frame);
  ok = ok && resolve(handle, APPENDGUARD_STR(unw_get_accessors), u.get_accessors);
  ok = ok && resolve(handle, APPENDGUARD_STR(unw_local_addr_space), u.local_space);
  if (!ok) return;
  replace_memory_check(u);
  find_modules();
  g_unwinder = u;
  loaded = true;
}

}  // namespace

bool unwinder_unavailable() {
  return g_load_state.load(std::memory_order_acquire) == kUnavailable;
}

bool load_unwinder() {
  if (unwinder_loaded()) return true;
  if (t_loading) return false;
  t_loading = true;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  int state = g_load_state.load(std::memory_order_acquire);
  while (state == kNotLoaded || state == kLoading) {
    if (state == kNotLoaded &&
        g_load_state.compare_exchange_strong(state, kLoading, std::memory_order_acq_rel)) {
      bool loaded = false;
      {
        UnwindingScope loading;  // a child forked meanwhile never unwinds (its loader may be locked)
        run_on_site_stack(load_now, &loaded);
      }
      if (loaded) g_unwinder_loaded.store(true, std::memory_order_release);
      state = loaded ? kLoaded : kUnavailable;
      g_load_state.store(state, std::memory_order_release);
      break;
    }
    if (state == kLoading) sched_yield();  // another thread loads it
    state = g_load_state.load(std::memory_order_acquire);
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_loading = false;
  return state == kLoaded;
}

namespace {

bool in_this_library(unw_word_t ip) {
  return g_own.contains(ip);
}

// Return addresses point after the call: the call itself is looked up.
bool in_libc(const void* frame) {
  uintptr_t call = reinterpret_cast<uintptr_t>(frame) - 1;
  for (int i = 0; i < g_libc_count; ++i) {
    if (g_libc[i].contains(call)) return true;
  }
  return false;
}

// CPython's evaluation loop: the frames from it down are the interpreter's and its callers', which the
// Python stack says better. Returns the module it is in (the python executable or libpython), or null.
// Found by address when known at load, else by name (a libpython loaded later).
void* python_evaluation_module(const void* frame) {
  Dl_info info{};
  auto call = reinterpret_cast<uintptr_t>(frame) - 1;
  if (g_python_evaluation.high != 0 && !g_python_evaluation.contains(call)) return nullptr;
  if (!dladdr(reinterpret_cast<void*>(call), &info)) return nullptr;
  bool evaluation = g_python_evaluation.contains(call) ||
                    (info.dli_sname && (std::strstr(info.dli_sname, "PyEval_EvalFrame") ||
                                        std::strstr(info.dli_sname, "PyEval_EvalCode")));
  return evaluation ? info.dli_fbase : nullptr;
}

void* module_of(const void* frame) {
  Dl_info info{};
  auto lookup = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(frame) - 1);
  return dladdr(lookup, &info) ? info.dli_fbase : nullptr;
}

}  // namespace

int frames_that_matter(void* const* frames, int count, bool python_shown, bool reached_bottom) {
  int shown = count;
  if (python_shown) {
    for (int i = 1; i < count; ++i) {
      if (void* interpreter = python_evaluation_module(frames[i])) {
        // Above the loop, the interpreter's own frames that lead to the call (its io module, the
        // calling convention's glue) are noise too: the first frame, the call into libc, stays, and so
        // does everything from the last frame of an extension (libtorch, a C module) up.
        shown = i;
        while (shown > 1 && module_of(frames[shown - 1]) == interpreter) --shown;
        reached_bottom = false;  // the thread's start is below, and left out already
        break;
      }
    }
  }
  if (reached_bottom) {
    // The main thread starts at _start (the program's), which calls __libc_start_main; other threads at
    // libc's clone3 and start_thread.
    if (shown >= 3 && !in_libc(frames[shown - 1]) && in_libc(frames[shown - 2])) --shown;
    while (shown > 1 && in_libc(frames[shown - 1])) --shown;
  }
  return shown;
}

struct UnwindState {
  unw_context_t context;
  unw_cursor_t cursor;
};
static_assert(sizeof(UnwindState) <= kUnwindSpace && alignof(UnwindState) <= 64);
static_assert(sizeof(ReportScratch::unwind) == kUnwindSpace);

void capture_stack(CapturedStack& stack, int max_frames, int skip, unsigned char* unwind_space,
                   StackScope scope, bool stop_at_python) {
  // A stack that is all libc's (a destructor at exit, a thread of libc's own) is kept whole rather than
  // shown empty: a second pass, in this same frame so that `skip` counts the same frames.
  for (StackScope pass = scope;; pass = StackScope::kWhole) {
    stack.count = 0;
    stack.in_signal_handler = false;
    stack.reached_bottom = false;
    stack.libc_frames_skipped = 0;
    stack.frames_beyond = 0;
    if (!unwinder_loaded() || max_frames <= 0) return;
    if (g_unwinding_disabled.load(std::memory_order_relaxed)) return;
    UnwindingScope unwinding;
    if (max_frames > CapturedStack::kMaxFrames) max_frames = CapturedStack::kMaxFrames;
    auto* state = new (unwind_space) UnwindState;
    unw_context_t& context = state->context;
    unw_cursor_t& cursor = state->cursor;
    if (g_unwinder.getcontext(&context) != 0 || g_unwinder.init_local(&cursor, &context) != 0) return;
    int depth = 0;
    bool more = true;
    bool stopped = false;
    do {
      unw_word_t ip = 0;
      if (g_unwinder.get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) {
        more = false;
        break;
      }
      if (g_unwinder.is_signal_frame(&cursor) > 0) stack.in_signal_handler = true;
      if (depth++ < skip) continue;
      if (stack.count == 0 && in_this_library(ip)) continue;
      if (stack.count == 0 && pass == StackScope::kCulprit && in_libc(reinterpret_cast<void*>(ip))) {
        ++stack.libc_frames_skipped;
        continue;
      }
      stack.frames[stack.count++] = reinterpret_cast<void*>(ip);
      // Below the evaluation loop no signal frame can matter: a signal handler runs no Python code.
      stopped = stop_at_python && g_python_evaluation.contains(ip - 1);
    } while (!stopped && stack.count < max_frames && (more = g_unwinder.step(&cursor) > 0));
    stack.reached_bottom = !more;
    // Keep looking for a signal frame beyond the kept frames (it decides whether we may allocate), and
    // count the frames left out.
    for (; more && !stopped && stack.frames_beyond < 512 && g_unwinder.step(&cursor) > 0;
         ++stack.frames_beyond) {
      if (!stack.in_signal_handler && g_unwinder.is_signal_frame(&cursor) > 0) stack.in_signal_handler = true;
    }
    if (stack.count > 0 || stack.libc_frames_skipped == 0 || pass == StackScope::kWhole) return;
  }
}

namespace {

struct SiteRequest {
  void** frames;
  int max_frames;
  StackScope scope;
  uintptr_t cfa;     // the chain's canonical frame address: the open hook's, or capture_addresses's own
  SiteChain* chain;  // where to remember them (null: not remembered)
  int count;
};

// A word of the stack above the recording (a frame's return address): not the program's access for ASan
// or TSan to watch.
__attribute__((no_sanitize("address", "thread"))) uintptr_t word_at(uintptr_t address) {
  return *reinterpret_cast<const volatile uintptr_t*>(address);
}

// Recordings in progress on this thread: a signal handler's recording that interrupted another one
// neither reads nor writes the remembered sites (the interrupted one may be writing one).
__attribute__((tls_model("initial-exec"))) constinit thread_local int t_recording_sites = 0;

// The site's frames by unw_step, innermost first, with where each frame's return address was on the stack
// (its stack pointer less 8), so that the chain can be remembered (report/site_chains.h). What is kept is
// what capture_stack keeps: the frames from the first one outside this library (with kCulprit outside
// libc too; a stack that is all libc's then from the first outside this library), `max_frames` of them.
// On the site stack (report/site_stack.h): the context and the cursor take about 2 KiB.
void record_site(void* p) {
  auto* request = static_cast<SiteRequest*>(p);
  UnwindingScope unwinding;
  UnwindState state;
  if (g_unwinder.getcontext(&state.context) != 0 || g_unwinder.init_local(&state.cursor, &state.context) != 0)
    return;
  struct Link {
    uintptr_t ip;
    uintptr_t sp;
  };
  Link raw[SiteChain::kMaxLinks];
  // This library's frames, then (kCulprit) libc's, then those kept: the room for the first two is 24.
  const int window =
      request->max_frames + 24 < SiteChain::kMaxLinks ? request->max_frames + 24 : SiteChain::kMaxLinks;
  int n = 0;
  int ours = 0;  // raw[0 .. ours) are this library's
  int libc = 0;  // raw[ours .. ours + libc) are libc's, with kCulprit
  int kept = 0;
  bool linked = false;  // the frames from the chain's CFA on are in raw
  bool remember = request->chain != nullptr;
  do {
    unw_word_t ip = 0;
    unw_word_t sp = 0;
    if (g_unwinder.get_reg(&state.cursor, UNW_REG_IP, &ip) != 0 || ip == 0 ||
        g_unwinder.get_reg(&state.cursor, UNW_REG_SP, &sp) != 0)
      break;
    // A signal frame's caller's address is not where a call leaves it: such a chain is not remembered.
    if (g_unwinder.is_signal_frame(&state.cursor) > 0) remember = false;
    if (!linked) {
      if (sp != request->cfa && in_this_library(ip)) continue;  // the recording's own frames
      linked = true;
      if (sp != request->cfa) remember = false;
    }
    // The return address is where the call put it, just below the frame's stack pointer (x86-64).
    if (remember && (sp - request->cfa > UINT32_MAX || word_at(sp - 8) != ip)) remember = false;
    raw[n++] = {ip, sp};
    if (kept == 0 && libc == 0 && n - 1 == ours && in_this_library(ip)) {
      ++ours;
    } else if (kept == 0 && n - 1 == ours + libc && request->scope == StackScope::kCulprit &&
               in_libc(reinterpret_cast<void*>(ip))) {
      ++libc;
    } else {
      ++kept;
    }
  } while (kept < request->max_frames && n < window && g_unwinder.step(&state.cursor) > 0);
  if (kept == 0) libc = 0;  // all libc's: kept whole
  const int first_kept = ours + libc;
  const int count = n - first_kept < request->max_frames ? n - first_kept : request->max_frames;
  for (int i = 0; i < count; ++i) request->frames[i] = reinterpret_cast<void*>(raw[first_kept + i].ip);
  request->count = count;
  if (!remember || !linked) return;
  SiteChain& chain = *request->chain;
  chain.request = SiteChain::key(request->max_frames, static_cast<int>(request->scope));
  chain.first_kept = first_kept;
  chain.links = first_kept + count;
  for (int i = 0; i < chain.links; ++i) {
    chain.offset[i] = static_cast<uint32_t>(raw[i].sp - request->cfa);
    chain.address[i] = raw[i].ip;
  }
  SiteChains::publish(chain, request->cfa);
}

// A site not remembered (or a recording that interrupted another): unwound on the site stack, and
// remembered unless nested. Out of line: capture_addresses's reading back needs no frame of this size.
__attribute__((noinline)) int unwind_site(void** frames, int max_frames, StackScope scope, uintptr_t cfa) {
  const bool nested = t_recording_sites++ > 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  SiteChains* chains = nested ? nullptr : thread_site_chains();
  SiteRequest request{frames, max_frames, scope, cfa, chains ? &chains->start_recording() : nullptr, 0};
  run_on_site_stack(record_site, &request);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  --t_recording_sites;
  return request.count;
}

// A reading of this thread's chains, marked, so that a signal handler's recording meanwhile neither
// reads nor writes them. Only when no recording is in progress on this thread (t_recording_sites == 0).
template <typename Read>
[[gnu::always_inline]] inline int read_chains_marked(Read&& read) {
  t_recording_sites = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const int count = read();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_recording_sites = 0;
  return count;
}

// capture_addresses after the chain found last was not the one on the stack (or could not be read): the
// other chains, else an unwind. Out of line, with the request as its key, so that the reading back of
// the chain found last keeps no registers for it.
__attribute__((noinline)) int find_or_unwind_site(void** frames, uint32_t request, uintptr_t cfa) {
  const int max_frames = static_cast<int>(request >> 1);
  const auto scope = static_cast<StackScope>(request & 1);
  SiteChains* chains = mapped_site_chains();
  if (chains && t_recording_sites == 0) {
    const int count = read_chains_marked([&] { return chains->find(cfa, request, frames); });
    if (count >= 0) return count;
  }
  return unwind_site(frames, max_frames, scope, cfa);
}

}  // namespace

// The chain's canonical frame address (CFA) is the open hook's when given (`cfa`: the program's call, so
// that this library's frames below it are not compared at every open), else capture_addresses's own
// (__builtin_dwarf_cfa: where its caller's frame begins). A given CFA is used only at least a word above
// capture_addresses's own and within kMostBytesToTheHook of it (the open path's frames take a few KiB at
// most), so that a chain, read from cfa - 8 up, is never read from this frame or below it.
int capture_addresses(void** frames, int max_frames, StackScope scope, uintptr_t cfa) {
  if (!unwinder_loaded() || max_frames <= 0) return 0;
  return capture_loaded_addresses(frames, max_frames, scope, cfa);
}

int capture_loaded_addresses(void** frames, int max_frames, StackScope scope, uintptr_t cfa) {
  if (g_unwinding_disabled.load(std::memory_order_relaxed)) return 0;
  constexpr int kMostFrames =  // one test on every guarded open (issue 27)
      CapturedStack::kMaxFrames < SiteChain::kMaxLinks ? CapturedStack::kMaxFrames : SiteChain::kMaxLinks;
  if (max_frames > kMostFrames) max_frames = kMostFrames;
  constexpr uintptr_t kMostBytesToTheHook = uintptr_t{64} * 1024;
  const auto own = reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa());
  if (cfa - own - 8 >= kMostBytesToTheHook) cfa = own;  // 0 (not known), or not above this frame
  const uint32_t request = SiteChain::key(max_frames, static_cast<int>(scope));
  // A thread's first recording maps its chains (unwind_site): no call here but the last (issue 27).
  const SiteChains* chains = mapped_site_chains();
  if (__builtin_expect(chains != nullptr && t_recording_sites == 0, 1)) {
    const int count = read_chains_marked([&] { return chains->find_last(cfa, request, frames); });
    if (__builtin_expect(count >= 0, 1)) return count;
  }
  return find_or_unwind_site(frames, request, cfa);  // the other chains (the last is tried again)
}

void unwinder_after_fork_child() {
  t_loading = false;
  if (g_load_state.load(std::memory_order_relaxed) == kLoading) g_load_state.store(kUnavailable);
  if (g_threads_unwinding.load(std::memory_order_relaxed) > 0) {
    g_unwinding_disabled.store(true, std::memory_order_relaxed);
  }
  g_threads_unwinding.store(0, std::memory_order_relaxed);
}

void format_stack(TextBuffer& out, void* const* frames, int count, bool in_signal_handler) {
  if (count == 0) {
    out.add_text(g_unwinding_disabled.load()
                     ? "    (not unwound: this process was forked while another thread was unwinding)\n"
                 : unwinder_unavailable() ? "    (libunwind.so.8 is not installed: no backtrace)\n"
                 : !unwinder_loaded()
                     ? "    (not unwound: libunwind is loaded when a stack is first needed, and this process "
                       "first needed one where it cannot be loaded: a signal handler or a vfork child)\n"
                     : "    (no frames)\n");
    return;
  }
  UnwindingScope unwinding;  // get_proc_name is libunwind too
  unw_accessors_t* accessors = g_unwinder.get_accessors(*g_unwinder.local_space);
  for (int i = 0; i < count; ++i) {
    auto ip = reinterpret_cast<uintptr_t>(frames[i]);
    // Return addresses point after the call; look up the call itself.
    uintptr_t lookup = ip - 1;
    char name[512] = "";
    unw_word_t offset = 0;
    // libunwind's symbol lookup and the demangler allocate: inside a signal handler (which may have
    // interrupted malloc) names come from dladdr alone, and module+offset locate the rest.
    bool named =
        !in_signal_handler && accessors && accessors->get_proc_name &&
        accessors->get_proc_name(*g_unwinder.local_space, lookup, name, sizeof name, &offset, nullptr) == 0;
    Dl_info info{};
    bool has_module = dladdr(reinterpret_cast<void*>(lookup), &info) != 0 && info.dli_fname;
    const char* module = has_module ? info.dli_fname : "?";
    if (const char* slash = std::strrchr(module, '/')) module = slash + 1;
    uintptr_t module_offset = has_module ? ip - reinterpret_cast<uintptr_t>(info.dli_fbase) : ip;
    if (!named && has_module && info.dli_sname) {
      std::strncpy(name, info.dli_sname, sizeof name - 1);
      offset = ip - reinterpret_cast<uintptr_t>(info.dli_saddr);
      named = true;
    }
    const char* shown = named ? name : "??";
    char* demangled = nullptr;
    if (named && !in_signal_handler && name[0] == '_' && name[1] == 'Z') {
      int status = 0;
      demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
      if (status == 0 && demangled) shown = demangled;
    }
    // Symbol and module names come from the program's files: escaped, they cannot forge a line.
    out.add("    #{:<2} {:#014x} ", i, ip);
    add_one_line(out, shown);
    out.add("+{:#x} (", static_cast<uintptr_t>(offset));
    add_one_line(out, module);
    out.add("+{:#x})\n", module_offset);
    if (demangled) std::free(demangled);
  }
}

}  // namespace appendguard
