#include "report/backtrace.h"

#define UNW_LOCAL_ONLY
#include <cxxabi.h>
#include <dlfcn.h>
#include <libunwind.h>
#include <link.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "report/scratch.h"
#include "report/site_stack.h"

namespace appendguard {
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
  // libunwind's fast path (a per-thread cache of how each return address's frame is stepped out of):
  // about 100 instructions a frame once warm, against about 700 for unw_step. Optional.
  int (*backtrace)(void**, int) = nullptr;
};

Unwinder g_unwinder;
std::atomic<bool> g_loaded{false};
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

bool load_unwinder() {
  if (g_loaded.load(std::memory_order_acquire)) return true;
  void* handle = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!handle) return false;
  Unwinder u;
  // Names come from libunwind.h's macros, e.g. unw_step -> _ULx86_64_step.
  bool ok = resolve(handle, APPENDGUARD_STR(unw_tdep_getcontext), u.getcontext);
  ok = ok && resolve(handle, APPENDGUARD_STR(unw_init_local), u.init_local);
  ok = ok && resolve(handle, APPENDGUARD_STR(unw_step), u.step);
  ok = ok && resolve(handle, APPENDGUARD_STR(unw_get_reg), u.get_reg);
  ok = ok && resolve(handle, APPENDGUARD_STR(unw_is_signal_frame), u.is_signal_frame);
  ok = ok && resolve(handle, APPENDGUARD_STR(unw_get_accessors), u.get_accessors);
  ok = ok && resolve(handle, APPENDGUARD_STR(unw_local_addr_space), u.local_space);
  if (!ok) return false;
  resolve(handle, "unw_backtrace", u.backtrace);
  find_modules();
  g_unwinder = u;
  g_loaded.store(true, std::memory_order_release);
  return true;
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
    if (!g_loaded.load(std::memory_order_acquire) || max_frames <= 0) return;
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

// The frames of a site worth keeping, out of `raw` (innermost first, as unw_backtrace gives them): past
// libunwind's and this library's, and with kCulprit libc's at the top; a stack that is all libc's is kept
// whole. Returns how many were copied into `frames`.
int keep_site_frames(void* const* raw, int n, void** frames, int max_frames, StackScope scope) {
  int i = 0;
  while (i < n && !in_this_library(reinterpret_cast<uintptr_t>(raw[i]))) ++i;  // unw_backtrace's own
  if (i == n) i = 0;
  while (i < n && in_this_library(reinterpret_cast<uintptr_t>(raw[i]))) ++i;
  if (scope == StackScope::kCulprit) {
    int first = i;
    while (i < n && in_libc(raw[i])) ++i;
    if (i == n) i = first;
  }
  int count = 0;
  for (; i < n && count < max_frames; ++i) frames[count++] = raw[i];
  return count;
}

constexpr int kMaxRawSiteFrames = 64;

struct SiteRequest {
  void** frames;
  int max_frames;
  StackScope scope;
  bool nested;  // in a signal handler that interrupted another recording on this thread
  int count;
};

// Recordings in progress on this thread: unw_backtrace's per-thread cache is not made to be entered again
// from a signal handler that interrupted it, so a nested recording takes unw_step's way.
__attribute__((tls_model("initial-exec"))) constinit thread_local int t_recording_sites = 0;

// On the site stack (report/site_stack.h): unw_backtrace's cursor and context are about 2 KiB.
void capture_site(void* p) {
  auto* request = static_cast<SiteRequest*>(p);
  UnwindingScope unwinding;
  if (g_unwinder.backtrace && !request->nested) {
    void* raw[kMaxRawSiteFrames];
    // Room for this library's frames and libc's above the program's (fopen's way to the open).
    int wanted = request->max_frames + 24 < kMaxRawSiteFrames ? request->max_frames + 24 : kMaxRawSiteFrames;
    int n = g_unwinder.backtrace(raw, wanted);
    request->count =
        keep_site_frames(raw, n > 0 ? n : 0, request->frames, request->max_frames, request->scope);
    return;
  }
  ScratchLease lease;
  ReportScratch* scratch = lease.get();
  if (!scratch) return;
  capture_stack(scratch->stack, request->max_frames, 0, scratch->unwind, request->scope);
  for (int i = 0; i < scratch->stack.count; ++i) request->frames[i] = scratch->stack.frames[i];
  request->count = scratch->stack.count;
}

}  // namespace

int capture_addresses(void** frames, int max_frames, StackScope scope) {
  if (!g_loaded.load(std::memory_order_acquire) || max_frames <= 0) return 0;
  if (g_unwinding_disabled.load(std::memory_order_relaxed)) return 0;
  if (max_frames > CapturedStack::kMaxFrames) max_frames = CapturedStack::kMaxFrames;
  SiteRequest request{frames, max_frames, scope, false, 0};
  request.nested = t_recording_sites++ > 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  run_on_site_stack(capture_site, &request);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  --t_recording_sites;
  return request.count;
}

void unwinder_after_fork_child() {
  if (g_threads_unwinding.load(std::memory_order_relaxed) > 0) {
    g_unwinding_disabled.store(true, std::memory_order_relaxed);
  }
  g_threads_unwinding.store(0, std::memory_order_relaxed);
}

void format_stack(TextBuffer& out, void* const* frames, int count, bool in_signal_handler) {
  if (count == 0) {
    out.add_text(!g_loaded.load() ? "    (libunwind.so.8 is not installed: no backtrace)\n"
                 : g_unwinding_disabled.load()
                     ? "    (not unwound: this process was forked while another thread was unwinding)\n"
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
    out.add("    #{:<2} {:#014x} {}+{:#x} ({}+{:#x})\n", i, ip, shown, static_cast<uintptr_t>(offset), module,
            module_offset);
    if (demangled) std::free(demangled);
  }
}

}  // namespace appendguard
