// The raw-system-call layer (syscall_dispatch.h). One selector byte per thread (t_selector, pointed at by
// that thread's prctl): ALLOW costs a libc call nothing it did not cost before (the kernel compares the
// caller's address with libc's text and reads no byte for those), and a raw call one byte read in the
// kernel; BLOCK sends the thread's raw calls to on_sigsys. APPENDGUARD_SYSCALLS=auto sets a thread's byte
// to BLOCK when that thread makes a guarded file tracked (FileTable::on_live_files_changed) or creates a
// file with O_CREAT|O_EXCL, and the thread itself sets it back to ALLOW once the process has neither left
// (at the close of the last one, or lazily at its next trap): no thread ever writes another's byte, so
// there is no table of threads to keep. `always` sets every thread's byte to BLOCK when it is armed.
// A thread's dispatch is ON (its prctl) only while its byte is BLOCK under auto (sync_this_thread): while
// ON, the kernel takes every system call of the thread through its slow entry path, ALLOW or not (a 64 B
// write 1.09x), so a thread that never holds a guarded file never pays it. At load the main thread arms
// once and disarms, to learn whether the kernel allows the layer (its notice and the doctor).
//
// The handler runs on the thread that made the call, at a raw `syscall` instruction (never inside our own
// hooks, which call libc), so it may call the hooks as the program's own signal handlers may. It keeps
// errno, allocates nothing (the hooks allocate only what they do for the same libc call), is entered with
// SA_NODEFER (a raw call made by a signal handler that interrupted it is trapped again, not fatal), and
// performs the call itself through libc's syscall(), whose instruction is inside the allowed range.
#include "shim/syscall_dispatch.h"

#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <limits.h>
#include <link.h>
#include <linux/sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdio>

#include "core/lock.h"
#include "core/syscall_dispatch_policy.h"
#include "report/report.h"
#include "report/site_stack.h"
#include "shim/hook.h"
#include "shim/signal_masks.h"
#include "shim/signals_blocked_lock.h"
#include "shim/trace.h"
#include "shim/user_memory.h"

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_OFF 0
#define PR_SYS_DISPATCH_ON 1
#endif
#ifndef SYSCALL_DISPATCH_FILTER_ALLOW
#define SYSCALL_DISPATCH_FILTER_ALLOW 0
#define SYSCALL_DISPATCH_FILTER_BLOCK 1
#endif
#ifndef SYS_USER_DISPATCH
#define SYS_USER_DISPATCH 2
#endif

#if !defined(__x86_64__)
#error "the system call layer reads x86-64 registers"
#endif

namespace appendguard {
namespace {

// This thread's selector, which its prctl points at. A fork child's thread has its copy at the same
// address (re-armed by run_fork_child: it keeps the forking thread's value); a new thread starts at ALLOW.
__attribute__((tls_model("initial-exec"))) constinit thread_local char t_selector =
    SYSCALL_DISPATCH_FILTER_ALLOW;
// libc's executable segment: calls from there are never trapped.
constinit uintptr_t g_libc_text = 0;
constinit size_t g_libc_text_size = 0;
// The dynamic loader's (ld.so's) executable segment: its calls are trapped (the kernel allows one range),
// but they are its own work, never the program's: loading libraries, and LD_DEBUG's lines.
constinit uintptr_t g_loader_text = 0;
constinit size_t g_loader_text_size = 0;

enum class LayerState : int { kNotStarted, kArmed, kUnavailable };
constinit std::atomic<int> g_state{static_cast<int>(LayerState::kNotStarted)};
constinit int g_unavailable_error = 0;  // what prctl (or the lookup of libc) failed with
constinit const char* g_unavailable_why = "";
constinit bool g_say_unavailable = true;  // not under Valgrind or a sanitizer: tools of our own tests
constinit bool g_always = false;
constinit bool g_refuse_io_uring = true;
// APPENDGUARD_SYSCALLS is not off: libc's syscall() takes the hooks (armed or not).
constinit std::atomic<bool> g_syscall_function_hooked{false};

// The program's own SIGSYS action, and whether the layer holds SIGSYS (then sigaction/signal keep it).
constinit struct sigaction g_program_action = {};
constinit std::atomic<bool> g_holds_sigsys{false};

__attribute__((tls_model("initial-exec"))) constinit thread_local int t_raw_calls_in_progress = 0;

// Only ever this thread's own byte: the kernel reads it at each of this thread's system calls.
void set_selector(char value) {
  __atomic_store_n(&t_selector, value, __ATOMIC_RELAXED);
}

// The layer is available in this process (the probe at load armed): threads arm as they need to.
bool armed() {
  return g_state.load(std::memory_order_acquire) == static_cast<int>(LayerState::kArmed);
}

// The first PT_LOAD segment with execute permission of the object that has `address` in one of its
// PT_LOAD segments. Not dladdr: it also searches the object's symbol table for the nearest name (~30 us
// of every process's start-up under a hypervisor, issue 27); only the object is needed.
struct TextSearch {
  uintptr_t address;
  uintptr_t start;
  size_t size;
};

int find_text(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<TextSearch*>(data);
  bool contains = false;
  const ElfW(Phdr)* text = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (search->address >= start && search->address - start < ph.p_memsz) contains = true;
    if (!text && (ph.p_flags & PF_X)) text = &ph;
  }
  if (!contains) return 0;
  if (text) {
    search->start = info->dlpi_addr + text->p_vaddr;
    search->size = text->p_memsz;
  }
  return 1;
}

bool find_libc_text() {
  // syscall() is libc's own (ours is its hook): the object that defines the real one is libc.
  TextSearch search{reinterpret_cast<uintptr_t>(real_syscall.get()), 0, 0};
  dl_iterate_phdr(find_text, &search);
  g_libc_text = search.start;
  g_libc_text_size = search.size;
  return search.size != 0;
}

// ld.so is the object loaded at AT_BASE (0 when the program was started by running ld.so itself).
void find_loader_text() {
  TextSearch search{static_cast<uintptr_t>(getauxval(AT_BASE)), 0, 0};
  if (search.address != 0) dl_iterate_phdr(find_text, &search);
  g_loader_text = search.start;
  g_loader_text_size = search.size;
}

int arm_thread() {
  if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, g_libc_text, g_libc_text_size, &t_selector) !=
      0)
    return errno;
  return 0;
}

// This thread's dispatch as the kernel has it: set only by sync_this_thread (and the probe at load).
enum ThreadDispatch : char { kDispatchOff, kDispatchOn, kDispatchChanging };
__attribute__((tls_model("initial-exec"))) constinit thread_local char t_dispatch = kDispatchOff;

// This thread's dispatch ON exactly when its byte is BLOCK (always: every thread's is), with no prctl when
// it already is. A signal handler that interrupts a change finds kDispatchChanging and makes its own; the
// interrupted change then compares again with the byte, so the last prctl made matches it.
void sync_this_thread() {
  for (;;) {
    const char wanted = __atomic_load_n(&t_selector, __ATOMIC_RELAXED) == SYSCALL_DISPATCH_FILTER_BLOCK
                            ? kDispatchOn
                            : kDispatchOff;
    if (__atomic_load_n(&t_dispatch, __ATOMIC_RELAXED) == wanted) return;
    __atomic_store_n(&t_dispatch, kDispatchChanging, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (wanted == kDispatchOn) {
      unblock_sigsys_in_this_thread();
      arm_thread();
    } else {
      prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0);
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&t_dispatch, wanted, __ATOMIC_RELAXED);
  }
}

// ---- Notices: one line each, once per process ----

void say_notice(const char* text) {
  int error = errno;
  InternalScope internal;
  report_notice(text);
  errno = error;
}

void notice_once(OncePerProcess& once, const char* text) {
  if (once.first_time()) say_notice(text);
}

// The layer is unavailable: said once per process, with the pid the owner check asked for (each guarded
// open after that asks one getpid: it formatted the line and asked two before).
constinit OncePerProcess g_told_unavailable;

// Descriptors created with O_CREAT|O_EXCL that the library does not guard (note_exclusive_create): the
// creating thread's selector stays BLOCK while one is open. Under g_exclusive_lock, taken with every
// signal blocked.
struct ExclusiveFd {
  int fd;
  dev_t device;
  ino_t inode;
};
constexpr size_t kMaxExclusive = 16;
constinit ExclusiveFd g_exclusive[kMaxExclusive] = {};
constinit std::atomic<int> g_exclusive_count{0};
constinit Lock g_exclusive_lock;
constinit std::atomic<bool> g_any_live_file{false};

class ExclusiveGuard {
 public:
  ExclusiveGuard() : lock_(g_exclusive_lock) {}

 private:
  SignalsBlockedLock lock_;
};

// In the handler: the recorded descriptors that no longer refer to their file are dropped.
void sweep_exclusive() {
  ExclusiveGuard guard;
  int kept = 0;
  const int count = g_exclusive_count.load(std::memory_order_relaxed);
  for (int i = 0; i < count; ++i) {
    struct stat st;
    if (real_syscall(SYS_fstat, g_exclusive[i].fd, &st) == 0 && st.st_dev == g_exclusive[i].device &&
        st.st_ino == g_exclusive[i].inode)
      g_exclusive[kept++] = g_exclusive[i];
  }
  g_exclusive_count.store(kept, std::memory_order_relaxed);
}

// Whether this process has no guarded file and no exclusive-created descriptor left (auto's release).
bool nothing_to_trap() {
  return !g_any_live_file.load(std::memory_order_relaxed) &&
         g_exclusive_count.load(std::memory_order_relaxed) == 0;
}

// This thread's byte back to ALLOW when nothing is left to trap. Stored, then checked again: a signal
// handler that interrupted this thread between the check and the store, and made a file tracked, set the
// byte to BLOCK that the store undid; the second check puts it back.
void release_this_thread() {
  set_selector(SYSCALL_DISPATCH_FILTER_ALLOW);
  if (!nothing_to_trap()) set_selector(SYSCALL_DISPATCH_FILTER_BLOCK);
  sync_this_thread();  // off with ALLOW: this thread's calls take the kernel's fast path again
}

// auto: this thread's raw calls are trapped from now on.
void block_this_thread() {
  set_selector(SYSCALL_DISPATCH_FILTER_BLOCK);
  sync_this_thread();
}

// Out of line: its line buffer was in the frame of every guarded open (issue 24, item 6).
[[gnu::noinline]] void say_layer_unavailable() {
  char line[400];
  std::snprintf(
      line, sizeof line,
      "system calls made outside libc (raw syscall instructions: Rust's rustix, io_uring, Go) are not "
      "guarded in this process: %s%s%s; calls through libc are",
      g_unavailable_why, g_unavailable_error ? ": " : "",
      g_unavailable_error ? errno_name(g_unavailable_error) : "");
  say_notice(line);
}

// In the thread that makes a description of a guarded file tracked (true: every new one, a second
// description of a file already tracked included), and in the one that releases the process's last
// tracked file (false): with auto, the first thread's selector goes to BLOCK, the second's back to ALLOW
// if nothing else is left (every other thread's at its next trap, on_sigsys). Where the layer is
// missing, one line says so.
void on_live_files_changed(bool any, bool by_owner) {
  if (any) {
    g_any_live_file.store(true, std::memory_order_relaxed);
    if (__builtin_expect(armed(), 1)) {
      if (!g_always) block_this_thread();
      return;
    }
    if (g_say_unavailable &&
        g_state.load(std::memory_order_acquire) == static_cast<int>(LayerState::kUnavailable)) {
      const pid_t owner = file_table_owner_pid();  // 0 in a child sharing our memory: it says nothing
      if (owner != 0 && g_told_unavailable.first_time_in(owner)) say_layer_unavailable();
    }
    return;
  }
  // A child sharing our memory (vfork) must not say its parent has no file left (nor touch its byte).
  // A close's forget was made by the owner (note_close checked it): no second getpid.
  if (!by_owner && !owns_file_table()) return;
  g_any_live_file.store(false, std::memory_order_relaxed);
  if (armed() && !g_always && nothing_to_trap()) release_this_thread();
}

// ---- Performing a trapped call ----

struct Registers {
  long number;
  long a0, a1, a2, a3, a4, a5;
};

// A hook's result as the kernel returns it: -errno for a failure.
long kernel_result(long result) {
  return result == -1 ? -errno : result;
}

long perform_unchanged(const Registers& r) {
  return kernel_result(real_syscall(r.number, r.a0, r.a1, r.a2, r.a3, r.a4, r.a5));
}

constinit OncePerProcess g_told_thread;
constinit OncePerProcess g_told_io_uring;

long refuse_raw_thread() {
  notice_once(g_told_thread,
              "a raw clone of a thread (CLONE_VM with a stack, not through pthread_create) was refused with "
              "ENOSYS while guarded files are open: set APPENDGUARD_SYSCALLS=off to let it run unguarded");
  return -ENOSYS;
}

// fork, vfork (as a fork), clone and clone3 of a child with its own memory, around the same handlers as
// libc's fork. The child returns here, in its copy of our frame; it then resumes on the stack it asked for.
template <typename Perform>
long perform_fork(ucontext_t* uc, uint64_t stack_top, uint64_t tls, bool sets_tls, Perform&& perform) {
  run_fork_prepare();
  long result = perform();
  if (result != 0) {
    int error = errno;
    run_fork_parent();
    errno = error;
    return kernel_result(result);
  }
  run_fork_child();  // re-arms this thread (runtime.cpp)
  if (stack_top && uc) uc->uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(stack_top);
  if (sets_tls) real_syscall(SYS_arch_prctl, 0x1002 /* ARCH_SET_FS */, tls);  // no TLS of ours after this
  return 0;
}

long perform_clone(const Registers& r, ucontext_t* uc) {
  uint64_t flags = static_cast<uint64_t>(r.a0);
  uint64_t stack = static_cast<uint64_t>(r.a1);
  CloneWay way = clone_way(flags, stack);
  if (way == CloneWay::kRefused) return refuse_raw_thread();
  uint64_t performed = clone_flags_performed(flags, way);
  // x86-64 clone: flags, stack, parent_tid, child_tid, tls.
  return perform_fork(uc, stack, static_cast<uint64_t>(r.a4), flags & CLONE_SETTLS,
                      [&] { return real_syscall(SYS_clone, performed, 0L, r.a2, r.a3, 0L); });
}

long perform_clone3(const Registers& r, ucontext_t* uc) {
  clone_args args{};
  size_t size = static_cast<size_t>(r.a1);
  if (size < CLONE_ARGS_SIZE_VER0 || size > sizeof args) return perform_unchanged(r);  // the kernel says
  if (!copy_from_program(&args, reinterpret_cast<const void*>(r.a0), size)) return -EFAULT;
  CloneWay way = clone_way(args.flags, args.stack);
  if (way == CloneWay::kRefused) return refuse_raw_thread();
  uint64_t stack_top = args.stack ? args.stack + args.stack_size : 0;
  uint64_t tls = args.tls;
  bool sets_tls = args.flags & CLONE_SETTLS;
  args.flags = clone_flags_performed(args.flags, way);
  args.stack = 0;
  args.stack_size = 0;
  args.tls = 0;
  return perform_fork(uc, stack_top, tls, sets_tls, [&] { return real_syscall(SYS_clone3, &args, size); });
}

long perform_io_uring_setup(const Registers& r) {
  bool writes_guarded_files = g_files.any_tracked();
  if (g_refuse_io_uring && writes_guarded_files) {
    notice_once(g_told_io_uring, r.number == SYS_io_setup
                                     ? "io_setup (Linux AIO) refused with ENOSYS in a process that writes "
                                       "guarded files: its writes would not be seen (APPENDGUARD_IO_URING)"
                                     : "io_uring_setup refused with ENOSYS in a process that writes guarded "
                                       "files: its writes would not be seen; liburing users fall back to "
                                       "plain writes (APPENDGUARD_IO_URING)");
    return -ENOSYS;
  }
  long result = perform_unchanged(r);
  if (result >= 0 && writes_guarded_files)
    notice_once(g_told_io_uring,
                "an io_uring or Linux AIO context was set up in a process that writes "
                "guarded files: writes submitted through it are not seen "
                "(APPENDGUARD_IO_URING=allow)");
  return result;
}

// rt_sigprocmask: the handler returns to the mask in its frame, so a trapped call is applied there.
long perform_sigprocmask(const Registers& r, ucontext_t* uc) {
  uint64_t mask;
  memcpy(&mask, &uc->uc_sigmask, sizeof mask);
  const long result = program_rt_sigprocmask(r.a0, reinterpret_cast<const void*>(r.a1),
                                             reinterpret_cast<void*>(r.a2), r.a3, &mask);
  memcpy(&uc->uc_sigmask, &mask, sizeof mask);
  return result;
}

// The kernel's struct sigaction on x86-64.
struct KernelSigaction {
  void* handler;
  unsigned long flags;
  void* restorer;
  uint64_t mask;
};

// SIGSYS's action is the program's record while the layer holds SIGSYS; every other signal's goes to the
// kernel without SIGSYS in its mask.
long perform_sigaction(const Registers& r) {
  if (r.a0 != SIGSYS || r.a3 != sizeof(uint64_t) || !g_holds_sigsys.load(std::memory_order_acquire))
    return program_rt_sigaction(r.a0, reinterpret_cast<const void*>(r.a1), reinterpret_cast<void*>(r.a2),
                                r.a3);
  KernelSigaction asked{};
  if (r.a1 && !copy_from_program(&asked, reinterpret_cast<const void*>(r.a1), sizeof asked)) return -EFAULT;
  KernelSigaction before{reinterpret_cast<void*>(g_program_action.sa_handler),
                         static_cast<unsigned long>(g_program_action.sa_flags),
                         reinterpret_cast<void*>(g_program_action.sa_restorer), 0};
  memcpy(&before.mask, &g_program_action.sa_mask, sizeof before.mask);
  if (r.a1) {
    struct sigaction program = {};
    program.sa_handler = reinterpret_cast<void (*)(int)>(asked.handler);
    program.sa_flags = static_cast<int>(asked.flags);
    memcpy(&program.sa_mask, &asked.mask, sizeof asked.mask);
    g_program_action = program;
  }
  if (r.a2 && !copy_to_program(reinterpret_cast<void*>(r.a2), &before, sizeof before)) return -EFAULT;
  return 0;
}

// The kernel's EFAULT (or ENAMETOOLONG) for a pointer the hook of `call` would read, checked before the
// hook reads it: the paths, an openat2's open_how, the iovec arrays and the offsets of the copies. The
// data a write sends is read by the kernel itself.
long check_pointers(RawCall call, const Registers& r) {
  const long* a = &r.a0;
  auto path = [&](int i) { return check_program_string(reinterpret_cast<const char*>(a[i])); };
  auto readable = [&](int i, size_t n) {
    unsigned char probe[16];
    for (size_t at = 0; at < n; at += sizeof probe) {
      const size_t part = n - at < sizeof probe ? n - at : sizeof probe;
      if (!copy_from_program(probe, reinterpret_cast<const unsigned char*>(a[i]) + at, part)) return -EFAULT;
    }
    return 0;
  };
  auto iovecs = [&](int i, int count) {
    return count > 0 && count <= IOV_MAX ? readable(i, static_cast<size_t>(count) * sizeof(iovec)) : 0;
  };
  auto offset = [&](int i) { return a[i] ? readable(i, sizeof(off64_t)) : 0; };
  auto either = [](long first, long second) { return first != 0 ? first : second; };
  switch (call) {
    case RawCall::kOpen:
    case RawCall::kCreat:
    case RawCall::kTruncate:
    case RawCall::kUnlink:
    case RawCall::kExecve:
      return path(0);
    case RawCall::kOpenat:
    case RawCall::kUnlinkat:
    case RawCall::kExecveat:
      return path(1);
    case RawCall::kOpenat2:
      return either(path(1), readable(2, sizeof(open_how)));
    case RawCall::kRename:
      return either(path(0), path(1));
    case RawCall::kRenameat:
    case RawCall::kRenameat2:
      return either(path(1), path(3));
    case RawCall::kWritev:
    case RawCall::kPwritev:
    case RawCall::kPwritev2:
      return iovecs(1, static_cast<int>(a[2]));
    case RawCall::kSendfile:
      return offset(2);
    case RawCall::kCopyFileRange:
    case RawCall::kSplice:
      return either(offset(1), offset(3));
    default:
      return 0;
  }
}

// Calls whose hooks run on the library's own per-thread stack (report/site_stack.h), not on the stack
// the trap was raised on (a thread's stack that may be nearly full): all but those that return into the
// handler's frame in a child (fork, clone) or change the frame itself.
bool runs_on_own_stack(RawCall call) {
  switch (call) {
    case RawCall::kFork:
    case RawCall::kClone:
    case RawCall::kClone3:
    case RawCall::kSigprocmask:
    case RawCall::kSigaction:
    case RawCall::kSigreturn:
    case RawCall::kSigaltstack:
      return false;
    default:
      return true;
  }
}

// Whether this handler runs on the thread's alternate signal stack (its frame says where that stack is).
// There it stays: a signal that arrives while the handler ran on another stack would be delivered at the
// top of the alternate stack, over this handler's frame.
bool on_alternate_stack(const ucontext_t* uc) {
  const stack_t& alternate = uc->uc_stack;
  if (alternate.ss_flags & SS_DISABLE) return false;
  const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  return here - reinterpret_cast<uintptr_t>(alternate.ss_sp) < alternate.ss_size;
}

// sigaltstack: the handler's return restores the alternate stack its frame saved, so a trapped call that
// changes it is written into the frame too (a Go thread's own signal stack, set as it starts, was undone:
// "non-Go code disabled sigaltstack"). It is performed away from the alternate stack, with every signal
// blocked, where the handler runs on it (the kernel refuses a change made on that stack).
long perform_sigaltstack(const Registers& r, ucontext_t* uc) {
  long result;
  if (on_alternate_stack(uc)) {
    AllSignalsBlocked blocked;
    result = run_on_site_stack([&] { return perform_unchanged(r); });
  } else {
    result = perform_unchanged(r);
  }
  stack_t now;
  if (result == 0 && r.a0 != 0 && real_syscall(SYS_sigaltstack, nullptr, &now) == 0) uc->uc_stack = now;
  return result;
}

long perform(const Registers& r, ucontext_t* uc) {
  const long* a = &r.a0;
  auto ptr = [&](int i) { return reinterpret_cast<void*>(a[i]); };
  auto str = [&](int i) { return reinterpret_cast<const char*>(a[i]); };
  auto iov = [&](int i) { return reinterpret_cast<const iovec*>(a[i]); };
  auto off = [&](int i) { return reinterpret_cast<off64_t*>(a[i]); };
  auto fd = [&](int i) { return static_cast<int>(a[i]); };
  const RawCall call = classify_raw_call(r.number);
  if (const long bad = check_pointers(call, r)) return bad;
  switch (call) {
    case RawCall::kPass:
    case RawCall::kSigreturn:  // through libc's syscall(): performed as asked
      return perform_unchanged(r);
    case RawCall::kOpen:
      return kernel_result(::open(str(0), fd(1), static_cast<mode_t>(a[2])));
    case RawCall::kOpenat:
      return kernel_result(::openat(fd(0), str(1), fd(2), static_cast<mode_t>(a[3])));
    case RawCall::kOpenat2:
      if (static_cast<size_t>(a[3]) != sizeof(open_how)) return perform_unchanged(r);
      return kernel_result(
          openat2_through_hook(fd(0), str(1), static_cast<const open_how*>(ptr(2)), sizeof(open_how)));
    case RawCall::kCreat:
      return kernel_result(::creat(str(0), static_cast<mode_t>(a[1])));
    case RawCall::kWrite:
      return kernel_result(::write(fd(0), ptr(1), static_cast<size_t>(a[2])));
    case RawCall::kPwrite64:
      return kernel_result(::pwrite64(fd(0), ptr(1), static_cast<size_t>(a[2]), a[3]));
    case RawCall::kWritev:
      return kernel_result(::writev(fd(0), iov(1), fd(2)));
    case RawCall::kPwritev:  // x86-64: the whole offset in pos_l
      return kernel_result(::pwritev64(fd(0), iov(1), fd(2), a[3]));
    case RawCall::kPwritev2:  // fd, iov, count, pos_l, pos_h, flags
      return kernel_result(::pwritev64v2(fd(0), iov(1), fd(2), a[3], fd(5)));
    case RawCall::kSendfile:
      return kernel_result(::sendfile64(fd(0), fd(1), off(2), static_cast<size_t>(a[3])));
    case RawCall::kCopyFileRange:
      return kernel_result(::copy_file_range(fd(0), off(1), fd(2), off(3), static_cast<size_t>(a[4]),
                                             static_cast<unsigned>(a[5])));
    case RawCall::kSplice:
      return kernel_result(
          ::splice(fd(0), off(1), fd(2), off(3), static_cast<size_t>(a[4]), static_cast<unsigned>(a[5])));
    case RawCall::kLseek:
      return kernel_result(::lseek64(fd(0), a[1], fd(2)));
    case RawCall::kFtruncate:
      return kernel_result(::ftruncate64(fd(0), a[1]));
    case RawCall::kTruncate:
      return kernel_result(::truncate64(str(0), a[1]));
    case RawCall::kFallocate:
      return kernel_result(::fallocate64(fd(0), fd(1), a[2], a[3]));
    case RawCall::kClose:
      return kernel_result(::close(fd(0)));
    case RawCall::kCloseRange:
      return kernel_result(::close_range(static_cast<unsigned>(a[0]), static_cast<unsigned>(a[1]), fd(2)));
    case RawCall::kDup:
      return kernel_result(::dup(fd(0)));
    case RawCall::kDup2:
      return kernel_result(::dup2(fd(0), fd(1)));
    case RawCall::kDup3:
      return kernel_result(::dup3(fd(0), fd(1), fd(2)));
    case RawCall::kFcntl:
      return kernel_result(::fcntl(fd(0), fd(1), ptr(2)));
    case RawCall::kRename:
      return kernel_result(::rename(str(0), str(1)));
    case RawCall::kRenameat:
      return kernel_result(::renameat(fd(0), str(1), fd(2), str(3)));
    case RawCall::kRenameat2:
      return kernel_result(::renameat2(fd(0), str(1), fd(2), str(3), static_cast<unsigned>(a[4])));
    case RawCall::kUnlink:
      return kernel_result(::unlink(str(0)));
    case RawCall::kUnlinkat:
      return kernel_result(::unlinkat(fd(0), str(1), fd(2)));
    case RawCall::kFork:
      return perform_fork(uc, 0, 0, false, [] { return real_syscall(SYS_fork); });
    case RawCall::kClone:
      return perform_clone(r, uc);
    case RawCall::kClone3:
      return perform_clone3(r, uc);
    case RawCall::kExecve:
      return kernel_result(
          ::execve(str(0), static_cast<char* const*>(ptr(1)), static_cast<char* const*>(ptr(2))));
    case RawCall::kExecveat:
      return kernel_result(::execveat(fd(0), str(1), static_cast<char* const*>(ptr(2)),
                                      static_cast<char* const*>(ptr(3)), fd(4)));
    case RawCall::kIoUringSetup:
      return perform_io_uring_setup(r);
    case RawCall::kSigprocmask:
      return perform_sigprocmask(r, uc);
    case RawCall::kSigaction:
      return perform_sigaction(r);
    case RawCall::kSigaltstack:
      return uc ? perform_sigaltstack(r, uc) : perform_unchanged(r);
  }
  return perform_unchanged(r);
}

// A SIGSYS that dispatch did not send (seccomp's SECCOMP_RET_TRAP, kill): the program's own action.
void chain(int sig, siginfo_t* info, void* context) {
  struct sigaction program = g_program_action;
  if (program.sa_flags & SA_SIGINFO) {
    if (program.sa_sigaction) program.sa_sigaction(sig, info, context);
    return;
  }
  if (program.sa_handler == SIG_IGN) return;
  if (program.sa_handler == SIG_DFL) {  // the default: the process ends with SIGSYS, as it would have
    struct sigaction default_action = {};
    default_action.sa_handler = SIG_DFL;
    real_sigaction(SIGSYS, &default_action, nullptr);
    real_syscall(SYS_tgkill, real_syscall(SYS_getpid), real_syscall(SYS_gettid), SIGSYS);
    return;
  }
  program.sa_handler(sig);
}

void on_sigsys(int sig, siginfo_t* info, void* context) {
  if (__builtin_expect(info->si_code != SYS_USER_DISPATCH, 0)) return chain(sig, info, context);
  const int saved_errno = errno;
  auto* uc = static_cast<ucontext_t*>(context);
  greg_t* g = uc->uc_mcontext.gregs;
  Registers r{info->si_syscall, g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8], g[REG_R9]};
  if (__builtin_expect(g_exclusive_count.load(std::memory_order_relaxed) != 0, 0)) sweep_exclusive();
  const RawCall call = classify_raw_call(r.number);
  // A call of the loader's (its syscall instruction just before the frame's rip) is performed as it is:
  // through the guard, a line LD_DEBUG printed while a guard's libc function was resolved (dlsym) had
  // that guard resolve it again, whose line was trapped again, until the stack ran out (SIGSEGV in every
  // program under LD_DEBUG=bindings once it held a guarded file). Signal masks and actions still take
  // their way: a mask set here is the signal frame's, and SIGSYS stays ours.
  // The program's own restorer returning from its handler: this frame becomes the one it returns from.
  if (__builtin_expect(call == RawCall::kSigreturn, 0)) {
    if (!take_program_signal_frame(uc)) g[REG_RAX] = -EFAULT;
    errno = saved_errno;
    return;
  }
  if (__builtin_expect(call != RawCall::kPass, 0) &&
      static_cast<uintptr_t>(g[REG_RIP]) - 1 - g_loader_text < g_loader_text_size &&
      call != RawCall::kSigprocmask && call != RawCall::kSigaction && call != RawCall::kSigaltstack) {
    g[REG_RAX] = perform_unchanged(r);
    errno = saved_errno;
    return;
  }
  long result;
  if (__builtin_expect(call == RawCall::kPass, 1)) {
    result = perform_unchanged(r);
  } else {
    ++t_raw_calls_in_progress;
    result = runs_on_own_stack(call) && !on_alternate_stack(uc)
                 ? run_on_site_stack([&] { return perform(r, uc); })
                 : perform(r, uc);
    --t_raw_calls_in_progress;
  }
  // auto: the call is performed (through its guard); with nothing left to trap this thread stops trapping.
  // A fork child returns here too: it has its own copy of the byte.
  if (__builtin_expect(!g_always, 1) && nothing_to_trap()) release_this_thread();
  g[REG_RAX] = result;
  errno = saved_errno;
}

// The main executable's notes (from its program headers, as loaded) hold Go's build ID: a dynamically
// linked Go program (cgo) loads the library, and its runtime makes its file I/O by system calls of its own.
bool main_program_is_go() {
  const auto* headers = reinterpret_cast<const ElfW(Phdr)*>(getauxval(AT_PHDR));
  const size_t count = getauxval(AT_PHNUM);
  if (!headers) return false;
  uintptr_t bias = 0;
  for (size_t i = 0; i < count; ++i)
    if (headers[i].p_type == PT_PHDR) bias = reinterpret_cast<uintptr_t>(headers) - headers[i].p_vaddr;
  for (size_t i = 0; i < count; ++i) {
    if (headers[i].p_type != PT_NOTE) continue;
    const auto* notes = reinterpret_cast<const unsigned char*>(bias + headers[i].p_vaddr);
    if (notes_hold_go_build_id(notes, headers[i].p_memsz)) return true;
  }
  return false;
}

void unavailable(const char* why, int error) {
  g_unavailable_why = why;
  g_unavailable_error = error;
  g_state.store(static_cast<int>(LayerState::kUnavailable), std::memory_order_release);
}

}  // namespace

void note_exclusive_create(int fd) {
  if (!armed() || g_always || !owns_file_table()) return;
  struct stat st;
  if (real_syscall(SYS_fstat, fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
  ExclusiveGuard guard;
  const int count = g_exclusive_count.load(std::memory_order_relaxed);
  if (static_cast<size_t>(count) == kMaxExclusive) return;
  g_exclusive[count] = {fd, st.st_dev, st.st_ino};
  g_exclusive_count.store(count + 1, std::memory_order_relaxed);
  block_this_thread();  // this thread's: the one that will rename the file
}

void start_syscall_dispatch(const Config& config) {
  if (config.syscalls == SyscallLayer::kAuto && main_program_is_go())
    say_notice(
        "a Go program: its file I/O is made by system calls of its own, outside libc, which "
        "APPENDGUARD_SYSCALLS=auto does not guard; APPENDGUARD_SYSCALLS=always guards them");
  if (config.syscalls == SyscallLayer::kOff) return;
  g_syscall_function_hooked.store(true, std::memory_order_release);
  g_always = config.syscalls == SyscallLayer::kAlways;
  g_refuse_io_uring = config.io_uring == IoUring::kRefuse;
  g_files.on_live_files_changed(on_live_files_changed);
  // Valgrind runs the program from its own code cache and makes every system call from its own text:
  // the kernel would trap them all, and Valgrind does not take SIGSYS for its own calls.
  const char* preload = getenv("LD_PRELOAD");
  if (preload && strstr(preload, "vgpreload")) {
    g_say_unavailable = false;
    return unavailable("running under Valgrind", 0);
  }
  // The sanitizers' runtimes make their own system calls (inline instructions) from inside their
  // allocators and signal handling: each would be trapped there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  constexpr bool kSanitized = true;
#else
  constexpr bool kSanitized = false;
#endif
  if (kSanitized || dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__tsan_init") ||
      dlsym(RTLD_DEFAULT, "__msan_init")) {
    g_say_unavailable = false;
    return unavailable("a sanitizer runtime is loaded (it makes its own system calls)", 0);
  }
  // Before glibc 2.34 libpthread is a library of its own, whose system calls (futex in every contended
  // lock) are outside libc's text: each would be trapped.
  if (!libc_version_at_least(gnu_get_libc_version(), 2, 34))
    return unavailable("glibc before 2.34 (libpthread's own system calls would all be trapped)", 0);
  if (!find_libc_text()) return unavailable("libc's text was not found", 0);
  find_loader_text();
  // Armed first with ALLOW, to learn whether the kernel allows it before taking SIGSYS (auto disarms
  // below unless this thread already holds a guarded file).
  if (int error = arm_thread()) {
    return unavailable(error == EINVAL ? "the kernel has no Syscall User Dispatch (Linux 5.11+)"
                                       : "prctl(PR_SET_SYSCALL_USER_DISPATCH) was refused",
                       error);
  }
  struct sigaction ours = {};
  ours.sa_sigaction = on_sigsys;
  // SA_ONSTACK: on a thread's alternate stack where it has one, as Go's runtime asks of every handler (a
  // goroutine's stack has no room for a signal frame).
  ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART | SA_ONSTACK;
  sigemptyset(&ours.sa_mask);
  if (real_sigaction(SIGSYS, &ours, &g_program_action) != 0) {
    int error = errno;
    prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0);
    return unavailable("SIGSYS could not be handled", error);
  }
  g_holds_sigsys.store(true, std::memory_order_release);
  // Unblocked in this thread: a blocked SIGSYS from dispatch would end the process.
  unblock_sigsys_in_this_thread();
  g_state.store(static_cast<int>(LayerState::kArmed), std::memory_order_release);
  // Descriptors adopted across exec were tracked before the callback was set: this thread took them.
  if (g_files.any_live_file()) g_any_live_file.store(true, std::memory_order_relaxed);
  t_dispatch = kDispatchOn;
  if (g_always || g_files.any_tracked()) set_selector(SYSCALL_DISPATCH_FILTER_BLOCK);
  sync_this_thread();
}

// A new thread, and a fork child's thread (its dispatch is not inherited: off, whatever its copy says).
void arm_syscall_dispatch_in_this_thread() {
  if (!armed()) return;
  t_dispatch = kDispatchOff;
  if (g_always) set_selector(SYSCALL_DISPATCH_FILTER_BLOCK);  // auto: a new thread's byte is ALLOW
  sync_this_thread();
}

void reset_exclusive_after_fork_child() {
  g_exclusive_lock.reset_in_child();
}

bool syscall_dispatch_armed() {
  return armed();
}

bool raw_system_call_in_progress() {
  return t_raw_calls_in_progress > 0;
}

bool program_sigsys_action(const struct sigaction* action, struct sigaction* old) {
  if (!g_holds_sigsys.load(std::memory_order_acquire)) return false;
  if (old) *old = g_program_action;
  if (action) g_program_action = *action;
  return true;
}

}  // namespace appendguard

using namespace appendguard;

// ---- Hooks: libc's syscall(); threads are armed as they start; SIGSYS stays the layer's ----

// libc's syscall(): its instruction is in libc's text, so never trapped; a call of interest goes the
// handler's way (without a signal frame: a fork-like clone with a stack of its own and rt_sigreturn are
// performed unchanged; rt_sigprocmask applies to this thread's mask). Its variadic arguments are read as the
// six integer registers they travel in on x86-64 (as the open hooks read their mode). Our own calls of
// syscall() pass through.
APPENDGUARD_HOOK long syscall_hook(long number, long a0, long a1, long a2, long a3, long a4,
                                   long a5) __asm__("syscall");
long syscall_hook(long number, long a0, long a1, long a2, long a3, long a4, long a5) {
  RawCall call = classify_raw_call(number);
  if (__builtin_expect(call == RawCall::kPass, 1) ||
      !g_syscall_function_hooked.load(std::memory_order_acquire) || InternalScope::active() ||
      t_raw_calls_in_progress > 0 || (call == RawCall::kClone && a1 != 0) || call == RawCall::kClone3 ||
      call == RawCall::kSigreturn)
    return real_syscall(number, a0, a1, a2, a3, a4, a5);
  Registers r{number, a0, a1, a2, a3, a4, a5};
  ++t_raw_calls_in_progress;
  long result = call == RawCall::kSigprocmask
                    ? program_rt_sigprocmask(a0, reinterpret_cast<const void*>(a1),
                                             reinterpret_cast<void*>(a2), a3, nullptr)
                    : perform(r, nullptr);
  --t_raw_calls_in_progress;
  if (result < 0 && result > -4096) {
    errno = static_cast<int>(-result);
    return -1;
  }
  return result;
}

namespace {

struct ThreadStart {
  void* (*routine)(void*);
  void* argument;
};

void* start_armed(void* data) {
  ThreadStart start = *static_cast<ThreadStart*>(data);
  free(data);
  arm_syscall_dispatch_in_this_thread();
  return start.routine(start.argument);
}

}  // namespace

APPENDGUARD_HOOK int pthread_create(pthread_t* thread, const pthread_attr_t* attributes,
                                    void* (*routine)(void*), void* argument) {
  // auto: a new thread starts disarmed (ALLOW) and arms itself when it takes a guarded file.
  if (__builtin_expect(!armed() || !g_always, 1))
    return real_pthread_create(thread, attributes, routine, argument);
  auto* start = static_cast<ThreadStart*>(malloc(sizeof(ThreadStart)));
  if (!start) return real_pthread_create(thread, attributes, routine, argument);
  *start = {routine, argument};
  int result = real_pthread_create(thread, attributes, start_armed, start);
  if (result != 0) free(start);
  return result;
}
