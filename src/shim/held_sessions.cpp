#include "shim/held_sessions.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>

#include "core/open_flags.h"
#include "report/report.h"
#include "report/site_stack.h"
#include "report/summary.h"
#include "shim/guard_descriptor.h"
#include "shim/guarded_paths.h"
#include "shim/held_file.h"
#include "shim/mount_guard.h"
#include "shim/real_io.h"
#include "shim/signals_blocked_lock.h"
#include "shim/trace.h"

namespace appendguard {

constinit std::atomic<int> g_held_count{0};

namespace {

constinit std::atomic<unsigned> g_children{0};

constinit HeldSet g_held;
constinit Lock g_held_lock;

// The committer thread (the time limit): started at the first open that starts a session to be held
// (finish_open), so a process that never holds a file has none, and a signal handler's close never
// creates it (pthread_create is not async-signal-safe). g_committer_started is reset in a fork child
// (threads do not survive fork); g_wake is the futex word it waits on (bumped when the set gains its
// first session).
constinit std::atomic<bool> g_committer_started{false};
constinit std::atomic<uint32_t> g_wake{0};
// Set by the exit handler: closes after it are not held (nothing would commit them with a report), and
// the committer takes no more sessions.
constinit std::atomic<bool> g_exiting{false};
// The number the committer thread is committing, plus one (0: none): set under the set's lock when it
// takes the session out of the set, cleared (and waiters woken) once the real close returned and the
// number's closed_by_program() slot is cleared. Until then the number is the library's: dup2/dup3 onto
// it, close_range/closefrom over it and every call on it that saw its slot wait (futex) for the commit
// to finish, so that the kernel never gives the program that number while the committer may still
// close it. g_held_count counts it as held meanwhile, so the cheap any_held_sessions() tests stay true.
// The exit handler waits for it too, so that its report is said and the store's answer is in before
// exit.
constinit std::atomic<uint32_t> g_in_flight{0};

// Set in a fork child whose parent held sessions: their numbers' slots are still marked closed by the
// program, but the descriptors behind them are the child's copies, which its close really closes.
constinit std::atomic<bool> g_marks_inherited{false};

// Parked numbers (issue 23): a descriptor of a file the library wrote anew or holds a session of, on a
// store that ends an upload at the first FLUSH after a write (rclone --vfs-cache-mode off), that the
// program closes while another descriptor of the file is still open (bash's `>>`: open, dup2(3, 1),
// close(3)). Its real close would be a FLUSH that ends the upload under the program's other descriptor
// (whose next write then fails EBADF), so the number stays open, closed for the program (its slot is
// FileTable::closed_by_program(), as a held number's), until no descriptor of the file is left here
// (sweep_parked). Under g_held_lock.
struct Parked {
  int fd;
  dev_t device;
  ino_t inode;
};
constexpr size_t kMaxParked = 64;
constinit Parked g_parked[kMaxParked] = {};
constinit size_t g_parked_count = 0;
constinit std::atomic<bool> g_any_parked{false};

void futex_wait(std::atomic<uint32_t>& word, uint32_t seen) {
  syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

// The set's lock with every signal blocked: a handler that closes or opens a guarded file must not wait
// for its own thread.
class HeldGuard {
 public:
  HeldGuard() : lock_(g_held_lock) {}
  ~HeldGuard() {
    // Parked numbers count too: dup2/dup3 onto one, close_range/closefrom over one reach
    // commit_held_range, which closes it before the kernel reuses the number. (Before lock_ is released.)
    g_held_count.store(
        static_cast<int>(g_held.size() + g_parked_count) + (g_in_flight.load(std::memory_order_relaxed) != 0),
        std::memory_order_relaxed);
  }
  HeldGuard(const HeldGuard&) = delete;
  HeldGuard& operator=(const HeldGuard&) = delete;

 private:
  SignalsBlockedLock lock_;
};

// Whether the program's close of `d`'s descriptor must not reach a store that ends uploads at FLUSH
// while another descriptor of the file is open: a file the library wrote anew or holds a session of.
bool flush_ends_upload(const Description* d) {
  return (d->starts_session || d->reused_session || d->site.written_back > 0) &&
         store_kind_of(d->path) == StoreKind::kWriteOnce;
}

bool parked_for(dev_t device, ino_t inode) {
  if (!g_any_parked.load(std::memory_order_relaxed)) return false;
  HeldGuard guard;
  for (size_t i = 0; i < g_parked_count; ++i) {
    if (g_parked[i].device == device && g_parked[i].inode == inode) return true;
  }
  return false;
}

bool park(int fd, Description* d) {
  close_parked_numbers();  // files no longer open here first: room, and no stale number
  const dev_t device = d->file->device;
  const ino_t inode = d->file->inode;
  {
    HeldGuard guard;
    if (g_parked_count == kMaxParked) return false;
    g_parked[g_parked_count++] = {fd, device, inode};
    g_files.close_for_program(fd);
    g_any_parked.store(true, std::memory_order_relaxed);
  }
  if (tracing()) {
    trace("close", fd, d->path, 0, 0, "%s",
          "parked: the number stays open until the file's last descriptor here closes (its close would "
          "end the store's upload under the other descriptors)");
  }
  return true;
}

// The real close of a held session: the store commits the upload here, and a FUSE store reports a failed
// upload as this close's error. Said loudly: the program's own close returned 0 long ago.
// The number's closed_by_program() slot: a commit in a program's thread clears it just before the real
// close (a use-after-close call in between reaches the held file, as it did before the slot existed;
// docs/limits.md); the committer thread clears it just after, since its number is published in
// g_in_flight and calls that meet the slot wait for it (`in_flight`).
int commit(const HeldSession& s, const char* when, bool in_flight = false) {
  if (!in_flight) g_files.clear_closed_by_program(s.fd);
  int result = real_close(s.fd);
  int error = errno;
  if (in_flight) g_files.clear_closed_by_program(s.fd);
  close_parked_numbers();
  if (result != 0) {
    char flags[160];
    format_open_flags(s.effective_flags, flags, sizeof flags);
    char message[kMaxPath + 600];
    std::snprintf(message, sizeof message,
                  "%s: the held write session (fd %d, opened %s, %llu bytes written) was committed %s, and "
                  "its real close failed with %s: the store refused the upload, the file there may be "
                  "missing or short (see docs/stores.md)",
                  s.path, s.fd, flags, static_cast<unsigned long long>(s.end_of_file), when,
                  errno_name(error));
    InternalScope internal;
    report_notice(message);
  } else if (tracing()) {
    trace("close", s.fd, s.path, 0, 0, "held session committed %s (%llu bytes)", when,
          static_cast<unsigned long long>(s.end_of_file));
  }
  errno = error;
  return result;
}

uint64_t now_ns() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}

uint64_t limit_ns() {
  return static_cast<uint64_t>(g_config->hold_seconds) * 1000000000u;
}

void wake_committer() {
  g_wake.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, &g_wake, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

// Commits every session held longer than the limit, then sleeps until the next one is due (or, with
// none held, until a close holds one). Every signal is blocked in this thread (it was created with them
// blocked): the program's signals go to the program's threads. The session is taken out of the set under
// its lock before its real close, so a concurrent reopen either took it first (and this thread never
// sees it) or does not find it and opens the file as usual; the number is closed only by the one that
// took it, and the program believes it closed.
void* committer_main(void*) {
  char when[96];
  std::snprintf(when, sizeof when, "after %u s without a reopen (APPENDGUARD_HOLD_SECONDS)",
                g_config->hold_seconds);
  while (true) {
    uint32_t seen = g_wake.load(std::memory_order_acquire);
    HeldSession s;
    bool expired;
    uint64_t deadline;
    uint64_t now = now_ns();
    {
      HeldGuard guard;
      if (g_exiting.load(std::memory_order_relaxed)) return nullptr;
      expired = g_held.take_expired(now, limit_ns(), s);
      deadline = g_held.next_deadline(limit_ns());
      if (expired) g_in_flight.store(static_cast<uint32_t>(s.fd) + 1, std::memory_order_relaxed);
    }
    if (expired) {
      commit(s, when, true);
      {
        HeldGuard guard;  // its destructor counts the session out of g_held_count
        g_in_flight.store(0, std::memory_order_release);
      }
      futex_wake_all(g_in_flight);
      continue;
    }
    struct timespec wait = {};
    struct timespec* timeout = nullptr;
    if (deadline != 0) {
      uint64_t left = deadline > now ? deadline - now : 0;
      wait.tv_sec = static_cast<time_t>(left / 1000000000u);
      wait.tv_nsec = static_cast<long>(left % 1000000000u);
      timeout = &wait;
    }
    syscall(SYS_futex, &g_wake, FUTEX_WAIT_PRIVATE, seen, timeout, nullptr, 0);
  }
  return nullptr;
}

// At the first open that starts a session to be held (start_held_committer), or else at the first held
// close (a fork child holding a description its parent opened): not in a process that never holds a
// file. With every signal blocked around its creation, the thread starts with them blocked.
// pthread_create and pthread_detach are looked up at run time: linked, they would be GLIBC_2.34 symbols
// (packaging.glibc_floor); before glibc 2.34 they are found only when libpthread is loaded.
void start_committer() {
  if (g_config->hold_seconds == 0 || g_committer_started.exchange(true, std::memory_order_acq_rel)) return;
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  using Detach = int (*)(pthread_t);
  auto create = reinterpret_cast<Create>(dlsym(RTLD_DEFAULT, "pthread_create"));
  auto detach = reinterpret_cast<Detach>(dlsym(RTLD_DEFAULT, "pthread_detach"));
  int error = ENOSYS;
  if (create && detach) {
    pthread_t thread;
    {
      AllSignalsBlocked blocked;  // the committer thread starts with every signal blocked
      error = create(&thread, nullptr, committer_main, nullptr);
    }
    if (error == 0) detach(thread);
  }
  if (error != 0) {
    // No limit in this process then (g_committer_started stays set: said once, never retried); the
    // sessions are still committed by the other events.
    InternalScope internal;
    report_notice(
        "could not start the thread that commits held write sessions after "
        "APPENDGUARD_HOLD_SECONDS: held files are committed at their reopen, exit or exec only");
  }
}

}  // namespace

// Held sessions use descriptors (issue 24, item 9: with RLIMIT_NOFILE at 64, a program writing 200 files
// one at a time got EMFILE from its 58th file on, and nothing said why). The number a session keeps was
// the lowest free one at its open, so every number below it was in use then: when it comes within a
// reserve of the soft limit (a quarter of it, at least 16 numbers), the older half of the held sessions
// is committed, which frees low numbers for the program's next opens (committing one per close was not
// enough: the next open took the freed low number, the one after it a number above the last).
namespace {
void leave_descriptors_free(int fd) {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  const uint64_t reserve = limit.rlim_cur / 4 > 16 ? limit.rlim_cur / 4 : 16;
  if (static_cast<uint64_t>(fd) + reserve < limit.rlim_cur) return;
  size_t to_commit = 0;
  {
    HeldGuard guard;
    to_commit = (g_held.size() + 1) / 2;
  }
  for (size_t i = 0; i < to_commit; ++i) {
    HeldSession oldest;
    {
      HeldGuard guard;
      if (!g_held.take_expired(~uint64_t{0}, 1, oldest)) return;  // the oldest, whenever it was held
    }
    commit(oldest, "to leave descriptors free under RLIMIT_NOFILE (held sessions keep theirs open)");
  }
}
}  // namespace

// Really closes the parked numbers `goes(parked)` picks, after taking them out of the set; keeps errno.
template <typename Picks>
void close_parked_where(Picks&& goes) {
  int error = errno;
  Parked gone[kMaxParked];
  size_t count = 0;
  {
    HeldGuard guard;
    size_t kept = 0;
    for (size_t i = 0; i < g_parked_count; ++i) {
      if (goes(g_parked[i])) {
        gone[count++] = g_parked[i];
      } else {
        g_parked[kept++] = g_parked[i];
      }
    }
    g_parked_count = kept;
    g_any_parked.store(kept != 0, std::memory_order_relaxed);
  }
  for (size_t i = 0; i < count; ++i) {
    g_files.clear_closed_by_program(gone[i].fd);
    real_close(gone[i].fd);
  }
  errno = error;
}

void close_parked_numbers() {
  if (!g_any_parked.load(std::memory_order_relaxed) || !owns_file_table()) return;
  // Those of files no longer open here: a FLUSH after the upload ended, nothing to do for the store.
  close_parked_where([](const Parked& p) {
    uint64_t end;
    return !g_files.end_of_file_of(p.device, p.inode, end);
  });
}

namespace {

// A close of a description that started a session, not parked: held, if the facts say so.
bool hold_session(int fd, Description* d) {
  CloseFacts facts;
  facts.hold_mode = true;
  facts.started_session = true;
  facts.by_owner = owns_file_table();
  facts.commit_requested = d->commit_requested.load(std::memory_order_relaxed);
  if (!facts.by_owner || facts.commit_requested) return false;
  facts.last_descriptor = g_files.is_last_descriptor_of_file(fd);
  HeldSession s;
  {
    HeldFile file(fd, d);
    if (!file) return false;
    facts.reservation_pending = file->reserved_size != 0;
    s.device = file->device;
    s.inode = file->inode;
    s.end_of_file = file->end_of_file;
    // A *.safetensors file with bytes past its header is complete (safetensors 0.7's "wb", torch's
    // save of one): no reopen will follow, and a held session would keep it from other processes
    // (mountpoint-s3: EPERM; rclone off: ENOENT). A header alone is held: the consolidation reopens it.
    const uint64_t header_end = file->safetensors_header_end.load(std::memory_order_relaxed);
    if (header_end != 0 && s.end_of_file > header_end) return false;
  }
  if (!holds_on_close(facts)) return false;
  s.fd = fd;
  s.original_flags = d->site.original_flags;
  s.effective_flags = d->site.effective_flags;
  s.owner = raw_getpid();
  s.children = g_children.load(std::memory_order_relaxed);
  s.held_at = now_ns();
  std::snprintf(s.path, sizeof s.path, "%s", d->path);
  // Never into an exec'd program: the session is this process's.
  real_fcntl(fd, F_SETFD, FD_CLOEXEC);
  HeldSession evicted;
  bool full;
  bool first;
  {
    // Closed, for the program: its slot says so from now on (calls on the number fail EBADF), in the
    // same critical section as the set learns the number, so that dup2 onto it sees one or the other.
    HeldGuard guard;
    full = g_held.add(s, evicted);
    g_files.close_for_program(fd);
    first = g_held.size() == 1;
  }
  if (first) {
    start_committer();
    wake_committer();
  }
  count_event(g_summary.held_sessions);
  if (tracing()) {
    trace("close", fd, s.path, 0, 0, "held: the descriptor stays open for the next write open (%llu bytes)",
          static_cast<unsigned long long>(s.end_of_file));
  }
  if (full) commit(evicted, "because 64 files were held (the oldest goes first)");
  leave_descriptors_free(fd);
  return true;
}

}  // namespace

// The held sessions' work copies sessions, each with its 4 KiB path, in its frames: on the thread's site
// stack (report/site_stack.h), which a program's thread of 16 KiB does not have room for (a close that
// held its file there died of SIGSEGV: e2e.test_small_stacks). Here and in the entries below, once a
// session is there to work on; the tests that decide there is none stay on the caller's stack.
bool hold_instead_of_close(int fd, Description* d) {
  if (current_mode() != Mode::kEnforce || g_exiting.load(std::memory_order_relaxed)) return false;
  if (flush_ends_upload(d) && owns_file_table() && !g_files.is_last_descriptor_of_file(fd) && park(fd, d))
    return true;
  // A file with parked numbers is not held: its real close ends the upload, then they are closed.
  if (!d->starts_session || parked_for(d->file->device, d->file->inode)) return false;
  return run_on_site_stack([&] { return hold_session(fd, d); });
}

namespace {

bool take_held_here(dev_t device, ino_t inode, int flags, HeldReuse& out) {
  HeldSession held;
  {
    HeldGuard guard;
    if (!g_held.take_file(device, inode, held)) return false;
  }
  unsigned children = g_children.load(std::memory_order_relaxed);
  if (on_open_of_held(held, flags, children) == HeldOpen::kReuse) {
    out = {held.fd, held.end_of_file, held.effective_flags};
    return true;
  }
  commit(held, held.children != children ? "before a reopen, since a child process started while it was held "
                                           "(its copy of the descriptor may have ended the upload)"
                                         : "before a truncating open of the same file");
  return false;
}

}  // namespace

bool take_held_for_open(dev_t device, ino_t inode, int flags, HeldReuse& out) {
  if (!any_held_sessions() || !owns_file_table()) return false;
  return run_on_site_stack([&] { return take_held_here(device, inode, flags, out); });
}

namespace {

void commit_held_before_read_here(int dirfd, const char* path) {
  char full_path[kMaxPath];
  if (!guarded_path_at(dirfd, path, full_path)) return;
  struct stat64 st;
  if (fstatat64(dirfd, path, &st, 0) != 0) return;
  HeldSession s;
  {
    HeldGuard guard;
    if (!g_held.take_file(st.st_dev, st.st_ino, s)) return;
  }
  int error = errno;
  commit(s, "before the program opened the file for reading");
  errno = error;
}

}  // namespace

void commit_held_before_read(int dirfd, const char* path) {
  if (!path || InternalScope::active() || !owns_file_table()) return;
  run_on_site_stack([&] { commit_held_before_read_here(dirfd, path); });
}

bool commit_held_file(dev_t device, ino_t inode, const char* when) {
  if (!any_held_sessions() || !owns_file_table()) return false;
  return run_on_site_stack([&] {
    HeldSession s;
    {
      HeldGuard guard;
      if (!g_held.take_file(device, inode, s)) return false;
    }
    int error = errno;
    commit(s, when);
    errno = error;
    return true;
  });
}

void start_held_committer() {
  if (current_mode() == Mode::kEnforce) start_committer();  // sessions are held in enforce mode only
}

bool wait_while_committing(int fd) {
  if (fd < 0) return false;
  const uint32_t mine = static_cast<uint32_t>(fd) + 1;
  while (true) {
    uint32_t seen = g_in_flight.load(std::memory_order_acquire);
    if (seen != mine) break;
    futex_wait(g_in_flight, seen);
  }
  // Not (or no longer) in flight: a slot still marked is a number the program closed that we hold; a
  // slot cleared meanwhile (the commit just ended) is to be looked at again.
  return !g_files.closed_by_program_at(fd);
}

bool closed_by_the_program(int fd) {
  while (g_files.closed_by_program_at(fd)) {
    if (!wait_while_committing(fd)) return true;
  }
  return false;
}

namespace {

// close_taken_number's loop, for a number we hold (or one whose slot changed meanwhile): out of line, so
// that a tracked descriptor's close saves no registers on its way to close_tracked.
[[gnu::noinline]] int close_held_number(int fd) {
  while (true) {
    Description* d = g_files.slot(fd);
    if (!d) return real_close(fd);
    if (d != closed_by_program()) return close_tracked(fd);
    if (!wait_while_committing(fd)) {
      // A second close of a number we hold: EBADF, as without the library; the session stays. In a fork
      // child, a number the parent held (its mark came with the memory, its session did not) is this
      // process's copy of the descriptor: it is really closed (and its mark cleared), still with EBADF,
      // since the program closed that number before the fork.
      if (g_marks_inherited.load(std::memory_order_relaxed) && owns_file_table()) {
        bool ours;
        {
          HeldGuard guard;
          ours = g_held.holds_fd(fd);
        }
        if (!ours) {
          g_files.clear_closed_by_program(fd);
          real_close(fd);
        }
      }
      errno = EBADF;
      return -1;
    }
  }
}

}  // namespace

__attribute__((noinline)) int close_taken_number(int fd) {
  Description* d = g_files.slot(fd);
  if (__builtin_expect(d != nullptr && d != closed_by_program(), 1)) return close_tracked(fd);
  return close_held_number(fd);  // looks at the slot again: a held number, or one closed meanwhile
}

void commit_held_range(unsigned first, unsigned last, const char* when, bool parked_too) {
  if (parked_too && g_any_parked.load(std::memory_order_relaxed) && owns_file_table()) {
    // The program installs or closes descriptors over parked numbers: they are really closed first.
    close_parked_where([first, last](const Parked& p) {
      const unsigned fd = static_cast<unsigned>(p.fd);
      return fd >= first && fd <= last;
    });
  }
  if (!any_held_sessions() || !owns_file_table()) return;
  int error = errno;
  run_on_site_stack([&] {
    while (true) {
      HeldSession s;
      {
        HeldGuard guard;
        if (g_held.take_range(first, last, &s, 1) == 0) break;
      }
      commit(s, when);
    }
  });
  // A number in [first, last] the committer thread is closing now: the caller is about to install or
  // close descriptors there, so it waits until that close is done.
  while (true) {
    uint32_t seen = g_in_flight.load(std::memory_order_acquire);
    if (seen == 0 || seen - 1 < first || seen - 1 > last) break;
    futex_wait(g_in_flight, seen);
  }
  errno = error;
}

void commit_all_held(const char* when) {
  // Not the parked numbers: at exec they stay open in the new program beside the descriptor they share
  // a description with (closing them would end the upload under it), close-on-exec or not (Python opens
  // with O_CLOEXEC; the kernel's close at exec is a FLUSH too); at exit the kernel closes them.
  if (g_any_parked.load(std::memory_order_relaxed) && owns_file_table()) {
    close_parked_numbers();  // those of files no longer open here
    HeldGuard guard;
    for (size_t i = 0; i < g_parked_count; ++i) real_fcntl(g_parked[i].fd, F_SETFD, 0);
  }
  commit_held_range(0, ~0u, when, false);
}

void commit_held_at_exit() {
  if (!owns_file_table()) return;
  if (!g_committer_started.load(std::memory_order_acquire) && !any_held_sessions()) {
    g_exiting.store(true, std::memory_order_relaxed);  // a process that never held: no lock, no syscall
    return;
  }
  {
    HeldGuard guard;  // the committer reads it under the lock: after this it takes nothing more
    g_exiting.store(true, std::memory_order_relaxed);
  }
  commit_all_held("at exit");
  // A commit the committer thread took before: its report and the store's answer come before exit.
  while (true) {
    uint32_t seen = g_in_flight.load(std::memory_order_acquire);
    if (seen == 0) break;
    futex_wait(g_in_flight, seen);
  }
}

void note_child_started() {
  g_children.fetch_add(1, std::memory_order_relaxed);
}

void forget_held_after_fork_child() {
  g_held_lock.reset_in_child();
  if (g_held.size() != 0 || g_in_flight.load(std::memory_order_relaxed) != 0 || g_parked_count != 0)
    g_marks_inherited.store(true, std::memory_order_relaxed);
  g_parked_count = 0;  // the parent's: the child's copies are really closed by its close (close_taken_number)
  g_any_parked.store(false, std::memory_order_relaxed);
  g_held.forget_all();
  g_held_count.store(0, std::memory_order_relaxed);
  g_committer_started.store(false, std::memory_order_relaxed);  // the parent's thread is not here
  g_in_flight.store(0, std::memory_order_relaxed);
}

}  // namespace appendguard
