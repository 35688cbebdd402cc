// What this process knows about guarded files.
// A TrackedFile is one (device, inode) and holds the end of file; a Description is one open file
// description (what open() creates) and holds the logical position; descriptors point at descriptions and
// dup'd descriptors share one. Lookup by descriptor is one relaxed load from a constant-initialized array,
// so untracked descriptors cost no lock and no allocation. Descriptions, files and paths live in page
// pools (core/page_pool.h) whose pages are given back to the kernel once every object on them is free,
// but stay mapped: a racing reader never touches unmapped memory (it reads a recycled object or zeros).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/eof_rule.h"
#include "core/fd_slots.h"
#include "core/hidden.h"
#include "core/lock.h"
#include "core/page_pool.h"

namespace appendguard {

// A relaxed load of `flag` compared where it is (cmpb): GCC loads an atomic into a register and tests it
// there, one instruction more on every untracked write and close. A one-byte load is atomic on x86-64.
[[gnu::always_inline]] inline bool relaxed_flag_is_set(const std::atomic<bool>& flag) {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
  bool set;
  asm("cmpb $0, %1" : "=@ccne"(set) : "m"(flag));
  return set;
#else
  return flag.load(std::memory_order_relaxed);
#endif
}

constexpr int kMaxTrackedFd = 1 << 20;  // Linux's default fs.nr_open
constexpr size_t kMaxPath = 4096;
constexpr int kOpenFrames = 24;
constexpr uint8_t kNoPathClass = 0xff;      // Description::path_class of a path in no buffer
constexpr uint8_t kInlinePathClass = 0xfe;  // Description::path_class of a path in Description::short_path
constexpr size_t kShortPath = 72;           // what fills a description's page-pool object up to 11 a page

struct TrackedFile {
  Lock lock;  // serializes check + write for every description on this file
  // Its identity's hash in FileTable's index (registry lock held), kept so that neither the index's
  // insertion nor its deletions hash an identity again (issue 27: a close with 10,000 files open rehashed
  // each entry its deletion moved). In the padding after the lock: no bigger.
  uint32_t index_hash = 0;
  dev_t device = 0;
  ino_t inode = 0;
  uint64_t end_of_file = 0;  // guarded by lock
  // Deferred preallocation (guarded by lock): the size the program was promised, filled with zeros when
  // the file's last descriptor here closes; 0 when nothing is pending. Only `reserved_by` fills it: a
  // forked child closing its copies must not write into the parent's file.
  uint64_t reserved_size = 0;
  pid_t reserved_by = 0;
  // Whether a resize was ever deferred on this file since it was tracked (set with the lock held, read
  // without it): a close tests it before asking whether it is the file's last descriptor (the registry
  // lock, with every signal blocked), which only a file with a deferred preallocation needs to know.
  std::atomic<bool> resize_deferred{false};
  uint32_t descriptions = 0;  // guarded by the table's registry lock
  // The exit summary's counts of writes that wrote bytes, and of those bytes: kept per file and counted
  // under its lock, with no read-modify-write of a counter every writing thread shares (two atomic
  // additions to one cache line were about 5 % of a 64-byte write). Read without the lock
  // (__atomic_load_n) by FileTable::write_totals(), which adds them up.
  uint64_t writes = 0;
  uint64_t bytes_written = 0;
  // A *.safetensors file: where its header ends (8 + the length its first 8 bytes give), 0 if unknown.
  // Set by the first write into the empty file (lock held); read at its close (held_sessions.cpp: a file
  // with bytes past its header is complete, no reopen expected).
  std::atomic<uint64_t> safetensors_header_end{0};
  size_t live_index = 0;  // its place in FileTable's live files (registry lock held)

  void count_write(uint64_t bytes) {  // lock held
    add_under_lock(writes, 1);
    add_under_lock(bytes_written, bytes);
  }

 private:
  // Only a holder of the lock writes a counter, so a plain add to memory is enough: one instruction (GCC
  // makes a relaxed atomic load, add and store three), whose aligned 8-byte store a reader without the
  // lock sees whole on x86-64, as it would an atomic store.
  static void add_under_lock(uint64_t& counter, uint64_t amount) {
    asm volatile("addq %1, %0" : "+m"(counter) : "er"(amount));
  }
};

struct WriteTotals {
  uint64_t writes = 0;
  uint64_t bytes = 0;
};

struct OpenSite {
  const char* function = "";  // the libc entry point that opened it, e.g. "open64"
  int original_flags = 0;
  int effective_flags = 0;
  uint64_t written_back = 0;  // APPENDGUARD_REOPEN=rewrite: the bytes the library wrote back after O_TRUNC
  bool reused_held = false;   // answered with a held session's descriptor (write-once stores)
  // A read-write open on a store whose cache takes writes anywhere (rclone --vfs-cache-mode minimal), of
  // a file no pattern names: its writes below the end go through as on a local disk (looked at only on
  // the refused path, guard_write.h), and so do its truncations and preallocations (guard_size.h).
  bool writes_in_place = false;
  pid_t pid = 0;
  pid_t tid = 0;
  int frame_count = 0;
  // Only frames[0 .. frame_count) are meaningful (and copied: copy_open_site); left uninitialized so that
  // the site each guarded open builds on its stack is not zeroed first (issue 27).
  void* frames[kOpenFrames];
};

// What `from` holds, its frames up to its count (a whole OpenSite is about 250 bytes, its frames mostly
// unused): every guarded open copies its site into its description.
inline void copy_open_site(OpenSite& to, const OpenSite& from) {
  to.function = from.function;
  to.original_flags = from.original_flags;
  to.effective_flags = from.effective_flags;
  to.written_back = from.written_back;
  to.reused_held = from.reused_held;
  to.writes_in_place = from.writes_in_place;
  to.pid = from.pid;
  to.tid = from.tid;
  to.frame_count = from.frame_count;
  const int count = from.frame_count < 0             ? 0
                    : from.frame_count < kOpenFrames ? from.frame_count
                                                     : kOpenFrames;
  for (int i = 0; i < count; ++i) to.frames[i] = from.frames[i];
}

// Where the program last moved a description's position away from the end of file, for the report of
// a later write refused there (issue 10: with buffered writes that write comes at a close far from the
// seek). Recorded by a seek that leaves the end (seek_site_action), outside the file's lock; a report
// reads it without the lock: `recorded` is published last, and a seek racing a write on the same
// description from another thread may show a mixed site (both are the program's, and the write is
// refused either way).
constexpr int kSeekFrames = 16;
constexpr int kSeekPythonFrames = 6;
constexpr size_t kSeekPythonText = 1536;
struct SeekSite {
  std::atomic<bool> recorded{false};
  const char* function = "";  // the libc entry point, e.g. "lseek64"; "stdio_seek" for fseek's
  int64_t offset = 0;         // as the program asked, with `whence`
  int whence = 0;
  uint64_t position = 0;  // where the seek left the position
  uint64_t end_of_file = 0;
  pid_t tid = 0;
  int frame_count = 0;
  bool reached_bottom = false;  // frames[frame_count - 1] is the thread's outermost frame
  void* frames[kSeekFrames] = {};
  size_t python_size = 0;  // "    File ..." lines, innermost first (report/python_stack.h)
  char python[kSeekPythonText] = {};
};

enum class SeekSiteAction { kNone, kRecord, kForget };
// What a seek that moved the position from `before` to `after` (the end of file being `end`) does with
// the site: a seek onto the end forgets it (a write there is allowed); one that leaves the end records
// itself, as does the first that moves the position while none is recorded (an open that did not
// start at the end); a seek that does not move it (lseek(fd, 0, SEEK_CUR), ftell) records nothing.
constexpr SeekSiteAction seek_site_action(uint64_t before, uint64_t after, uint64_t end, bool recorded) {
  if (after == end) return recorded ? SeekSiteAction::kForget : SeekSiteAction::kNone;
  if (after == before) return SeekSiteAction::kNone;
  return before == end || !recorded ? SeekSiteAction::kRecord : SeekSiteAction::kNone;
}

// What a guarded open found of its store's renames, for its close (issue 27: no lookup there).
enum class StoreRenames : uint8_t { kUnknown, kYes, kNo };

struct Description {
  // One for the table while descriptors point at it, one per guarded call in flight (FileTable::pin).
  std::atomic<uint32_t> refs{0};
  TrackedFile* file = nullptr;
  uint64_t position = 0;  // guarded by file->lock
  bool program_appends = false;
  bool kernel_appends = false;
  bool readable_by_program = false;  // the program asked for read access
  // A read failed because appendguard made the descriptor write-only: later writes are refused
  // (PositionState::read_failed). Set under file->lock.
  bool read_failed = false;
  // The kernel offset is shared with another process (a fork, an inherited or received descriptor),
  // which may move it: writes at the position read it back first. Set by fork handlers without the lock.
  std::atomic<bool> shares_offset{false};
  // Held write sessions (core/held_files.h): this description created or truncated its file on a store
  // where sessions are held, so the program's last close keeps it open; fsync/fdatasync asks for the
  // real close instead.
  bool starts_session = false;
  bool reused_session = false;  // this description is a held session answering a later open
  std::atomic<bool> commit_requested{false};
  uint32_t descriptors = 0;    // guarded by the table's registry lock
  unsigned reported_once = 0;  // ReportOnce bits: repetitive kinds (reads, mappings) are reported once
  OpenSite site;
  // Where a seek last left the end (SeekSite, about 1.7 KB): out of line, made at the first seek that
  // records one (issue 27: inline, it was most of the memory of every tracked file, though few
  // descriptions ever seek away from the end); unmapped when the description is recycled (only pinned
  // calls read it).
  std::atomic<SeekSite*> seek_site_{nullptr};
  // The site to record into, made if there is none yet (with mmap: a seek may come from a signal
  // handler); null when memory runs out.
  SeekSite* seek_site_for_recording();
  // The recorded site, or null (for a report: it reads `recorded` itself).
  const SeekSite* seek_site() const { return seek_site_.load(std::memory_order_acquire); }
  bool seek_site_recorded() const {
    const SeekSite* s = seek_site();
    return s && s->recorded.load(std::memory_order_relaxed);
  }
  void forget_seek_site() {
    if (SeekSite* s = seek_site_.load(std::memory_order_acquire))
      s->recorded.store(false, std::memory_order_relaxed);
  }
  // The path as opened, NUL-terminated (at most kMaxPath - 1 characters): in short_path when it fits
  // (path_class kInlinePathClass: one pool object for the description and its path, issue 27), else out of
  // line (issue 27: an inline path[4096] made each tracked file cost about 6 KB), in a buffer of the
  // smallest power of two from 128 bytes that holds it (FileTable's path pools, class path_class), given
  // back when the description is.
  char* path = nullptr;
  uint8_t path_class = kNoPathClass;
  // Whether the store holding the file renames, as its open found (shim/spool.cpp: the close looks it up
  // only when unknown).
  StoreRenames store_renames = StoreRenames::kUnknown;
  // strlen(path), kept by FileTable::set_path (in the padding after the two bytes above) so that the write
  // and close paths do not measure the path again (issue 27).
  uint16_t path_length = 0;
  // A path shorter than kShortPath. Its last byte is never anything but NUL (as a pool buffer's), so that a
  // reader racing a recycle reads a string that ends within it. Not initialized: fresh pool memory is zeros.
  char short_path[kShortPath];

  // `held`: this description's file, whose lock the caller holds (shim/held_file.h passes the pointer it
  // locked, so that the file is not loaded again from the description after the lock's atomics).
  PositionState snapshot(const TrackedFile* held) const {
    return {position, held->end_of_file, program_appends, kernel_appends, read_failed};
  }
  void store(TrackedFile* held, const PositionState& s) {
    position = s.position;
    held->end_of_file = s.end_of_file;
  }
};

static_assert(sizeof(Description) <= 4096 / 11, "kShortPath: a description's pool object, 11 a page");

// What FileTable needs of an opened file to attach a description to it (track_reserved: the rest of the
// open's record the caller wrote into the description itself).
struct OpenedFile {
  const char* path = "";
  size_t path_length = 0;  // strlen(path) when the caller knows it (0: measured)
  dev_t device = 0;
  ino_t inode = 0;
  uint64_t size = 0;
  bool truncated = false;  // opened with O_TRUNC: the end is `size` even if another description knew more
};

// An open's whole record, for track(), which copies it into a description.
struct OpenRecord : OpenedFile {
  uint64_t position = 0;
  bool kernel_appends = false;
  bool program_appends = false;
  bool readable_by_program = false;
  bool shares_offset = false;
  bool starts_session = false;  // see Description::starts_session
  bool reused_session = false;
  StoreRenames store_renames = StoreRenames::kUnknown;  // see Description::store_renames
  const OpenSite* site = nullptr;
};

// The file whose lock this thread holds in a guarded call, if any: a signal handler that interrupted that
// call must not wait for the lock (its own thread would never release it).
extern APPENDGUARD_HIDDEN
    __attribute__((tls_model("initial-exec"))) constinit thread_local TrackedFile* t_held_file;

// The slot value of a number the program closed while the library keeps its descriptor open (a held
// write session, shim/held_sessions.h; in a fork child, a number the parent held): the hooks' one slot
// test sees the number taken, and their tracked path answers EBADF, as the kernel would without the
// library. Never dereferenced: lookup() filters it out; slot() returns it.
extern APPENDGUARD_HIDDEN constinit Description g_closed_by_program;
inline Description* closed_by_program() {
  return &g_closed_by_program;
}

class FileTable {
 public:
  constexpr FileTable() = default;

  // The description behind `fd`, or null: also for a number the program closed that we hold.
  Description* lookup(int fd) const {
    Description* d = slot(fd);
    return d == closed_by_program() ? nullptr : d;
  }
  // The slot as it is: null (nothing of ours), a description, or closed_by_program(). The hooks' fast
  // paths test this one load; a taken slot goes out of line.
  Description* slot(int fd) const { return slots_.load(fd, std::memory_order_acquire); }
  // Whether `fd` still refers to `d`, which was found in fd's slot before (so fd is in range: a guarded
  // call's re-check under the file's lock, shim/held_file.h). The index is masked rather than tested, so
  // that a wrong caller reads a wrong slot, never outside the table.
  bool still_refers_to(int fd, const Description* d) const {
    static_assert((kMaxTrackedFd & (kMaxTrackedFd - 1)) == 0);
    return slots_.load_small(fd, std::memory_order_acquire) == d;  // bounds-checked: a wrong fd reads null
  }
  bool any_tracked() const { return highest_fd_plus_one_.load(std::memory_order_relaxed) > 0; }
  // Whether some file is open here (one relaxed load): false in every process that tracks nothing now,
  // so that a write open of an unguarded name looks for the file by identity only when there is one.
  bool any_live_file() const { return live_file_count_published_.load(std::memory_order_relaxed) != 0; }
  // Whether file (device, inode) is open here through some tracked descriptor.
  bool tracks_file(dev_t device, ino_t inode);
  // The descriptors tracked here whose file is (device, inode), lowest first, up to `capacity`; returns
  // how many there are (possibly more than `capacity`).
  size_t descriptors_of_file(dev_t device, ino_t inode, int* out, size_t capacity);
  // Whether the failures of untracked writes are looked at (shim/unguarded_notice.h): set when some FUSE
  // mount is not guarded whole. Kept here, beside the slots, so the untracked path tests it at the address
  // it has already, in one instruction (a relaxed load is a plain one): written when the mount table is
  // read (at its first use, in any thread: true until then) and when a refresh finds a new mount, read
  // without ordering (a stale value only delays or adds one look at a failed call).
  bool watching_untracked_failures() const { return relaxed_flag_is_set(watch_untracked_failures_); }
  void watch_untracked_failures(bool on) {
    if (watch_untracked_failures_.load(std::memory_order_relaxed) != on)
      watch_untracked_failures_.store(on, std::memory_order_relaxed);
  }

  // Keeps `d` from being recycled while a guarded call uses it. False when `d` was recycled already (a
  // racing close): the call then must not touch `d`'s file. Whether `fd` still refers to `d` is for the
  // caller to check once it holds the file's lock (shim/held_file.h). Inline: every guarded call pins.
  bool pin(Description* d) {
    uint32_t refs = d->refs.load(std::memory_order_acquire);
    do {
      if (refs == 0) return false;  // recycled, or being recycled
    } while (!d->refs.compare_exchange_weak(refs, refs + 1, std::memory_order_acq_rel));
    return true;
  }
  void unpin(Description* d) {
    if (d->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) recycle_unpinned(d);
  }

  // Starts tracking `fd`, which must be a fresh descriptor. Returns nullptr if fd is out of range.
  Description* track(int fd, const OpenRecord& record);
  // The same in two steps, so that a guarded open writes its record (and captures its site's frames)
  // straight into the description, outside the registry's lock, rather than into a record that track
  // copies (issue 27). reserve_description: a description that belongs to the caller (in no slot, seen by
  // no other thread), null when memory runs out; usually the spare that the previous track_reserved put
  // aside (one atomic exchange, no lock). The caller writes every per-open field: position,
  // program_appends, kernel_appends, readable_by_program, shares_offset (false where the kernel appends),
  // starts_session, reused_session, store_renames and site, all of it. track_reserved attaches it to the
  // file and publishes it in fd's slot, complete, as track does; it returns nullptr (and takes `d` back)
  // if fd is out of range or memory runs out. Only the process that owns the table calls them.
  // Inline, the spare's exchange; out of line, the allocation under the lock (issue 27: the call was ~10
  // instructions of every guarded open).
  Description* reserve_description() {
    if (Description* d = spare_.exchange(nullptr, std::memory_order_acq_rel)) return d;
    return allocate_reserved_description();
  }
  Description* track_reserved(int fd, Description* d, const OpenedFile& opened);
  // After dup/dup2/dup3/F_DUPFD: `new_fd` shares `old_fd`'s description (dropping what new_fd had).
  void alias(int old_fd, int new_fd);
  // After close(fd) or dup2 onto fd: forget it (also a closed_by_program() mark). Returns true if fd was
  // tracked. Called only by the process that owns the table (its caller checks, shim/guard_descriptor.cpp
  // note_close): the live-files callback is told so (by_owner), and does not ask again.
  bool forget(int fd);
  // A held write session: the program closed `fd`, the library keeps it open. Its slot becomes
  // closed_by_program() (the description is released); clear_closed_by_program undoes that once the
  // descriptor is really closed (unless the slot was given to a new description meanwhile).
  void close_for_program(int fd);
  void clear_closed_by_program(int fd);
  bool closed_by_program_at(int fd) const { return slot(fd) == closed_by_program(); }
  // close_range/closefrom: forget every tracked fd in [first, last].
  void forget_range(unsigned first, unsigned last);
  // Looks up a file by identity (truncate(path) on an open file).
  bool end_of_file_of(dev_t device, ino_t inode, uint64_t& end_of_file);
  // True if `fd` is this process's only descriptor of its file (closing it closes the file here).
  bool is_last_descriptor_of_file(int fd);
  void set_end_of_file(dev_t device, ino_t inode, uint64_t end_of_file);

  // pthread_atfork hooks: the registry is locked across fork; in the child every file lock is released
  // because the threads that held them are gone. Both sides mark every description as sharing its kernel
  // offset with the other process.
  void before_fork();
  void after_fork_parent();
  void after_fork_child();

  // Called, with the registry held, in the thread that tracks a new description of a file (true; a second
  // description of a file already tracked too) and when the last file is released (false): the
  // raw-system-call layer traps that thread meanwhile (shim/syscall_dispatch.h). Set once, at start-up.
  // by_owner: the release comes from forget(), which only the owning process calls (else false: the
  // callback checks the owner itself).
  void on_live_files_changed(void (*callback)(bool any, bool by_owner)) { live_files_changed_ = callback; }

  // The registry's signal masks go through `system_call` (libc's own syscall(): the shim's hook of it
  // costs more, and a raw instruction outside libc would be trapped by the raw-call layer). Start-up.
  static void use_system_call(long (*system_call)(long, ...));

  // The pages its pools hold resident at most (objects in use, a few kept empty, each slab's bookkeeping
  // page), and the objects in use: for tests.
  size_t pool_pages() const {
    size_t pages = descriptions_.resident_pages() + files_.resident_pages();
    for (const PagePool& p : paths_) pages += p.resident_pages();
    return pages;
  }
  size_t descriptions_in_use() const { return descriptions_.objects_in_use(); }

  int highest_fd() const { return highest_fd_plus_one_.load(std::memory_order_relaxed) - 1; }
  // For scans of the table up to `last`: `fd` itself, or the next number that may be tracked (numbers
  // in groups of 64 that never held a record are skipped); last + 1 when none is left.
  int next_slot(int fd, int last) const { return slots_.next_used(fd, last); }

  // The writes counted on every file this process tracked (TrackedFile::count_write): the files
  // released already and the live ones. Writes in flight on other threads may be missed.
  WriteTotals write_totals();

 private:
  // First, at the object's address: the hooks index it without adding an offset.
  FdSlots<Description, kMaxTrackedFd> slots_;  // low numbers inline, the rest mapped when used

  void recycle_unpinned(Description* d);  // the last reference went with a guarded call
  // registry_ held. by_owner: the release comes from forget() (for live_files_changed_).
  void drop_descriptor(Description* d, bool by_owner);
  void release_description(Description* d);  // registry_ held; drop_descriptor, not by the owner
  void recycle_description(Description* d, bool by_owner);  // registry_ held
  void mark_offsets_shared();                               // registry_ held
  void release_file(TrackedFile* file, bool by_owner);      // registry_ held
  // registry_ held; `created`: the file was not tracked before (no other thread can reach it yet).
  TrackedFile* acquire_file(dev_t device, ino_t inode, uint64_t size, bool& created);

  void set_path(Description* d, const char* path, size_t length);  // registry_ held
  Description* allocate_reserved_description();                    // reserve_description without a spare
  Description* allocate_description();                             // registry_ held; null: out of memory
  // registry_ held: the rest of track and track_reserved, once `d`'s per-open fields are written.
  Description* attach_and_publish(std::atomic<Description*>* slot, int fd, Description* d, TrackedFile* file,
                                  bool created, const OpenedFile& opened);
  // The next reserve_description's description, made by track_reserved (registry_ held); null if none.
  std::atomic<Description*> spare_{nullptr};

  Lock registry_;
  uint64_t mask_before_fork_ = 0;
  // The highest descriptor ever tracked, plus one: zero means none, so that the whole table is
  // zero-initialized and lives in .bss (8 MiB of zero pages) rather than in the library file.
  std::atomic<int> highest_fd_plus_one_{0};
  std::atomic<bool> watch_untracked_failures_{false};
  // Where descriptions, files and path buffers live (registry_ held): page pools, each page returned to
  // the kernel once every object on it is free (issue 27: 10,000 closed files kept 5 MB).
  PagePool descriptions_{sizeof(Description)};
  PagePool files_{sizeof(TrackedFile)};
  static constexpr size_t kPathClasses = 6;  // 128 bytes to 4 KiB (shorter paths: Description::short_path)
  PagePool paths_[kPathClasses] = {PagePool(128),  PagePool(256),  PagePool(512),
                                   PagePool(1024), PagePool(2048), PagePool(4096)};
  TrackedFile** live_files_ = nullptr;  // files with open descriptions, found by identity
  size_t live_file_count_ = 0;
  std::atomic<size_t> live_file_count_published_{0};  // live_file_count_, for any_live_file()
  size_t live_file_capacity_ = 0;
  // The live files by (device, inode), open addressing with linear probing (issue 27: a guarded open and
  // the last close of a file scanned every live file: +144,000 instructions per open + write + close with
  // 10,000 guarded files open). Capacity a power of two, at least twice the live files; registry_ held.
  TrackedFile** file_index_ = nullptr;
  size_t file_index_capacity_ = 0;
  TrackedFile* find_live_file(dev_t device, ino_t inode) const;  // registry_ held
  bool index_live_file(TrackedFile* file);                       // registry_ held; false: out of memory
  bool rebuild_index(size_t capacity);                           // registry_ held; false: out of memory
  bool resize_live_files(size_t capacity);                       // registry_ held; false: out of memory
  void unindex_live_file(TrackedFile* file);                     // registry_ held
  // find_live_file with the identity's hash computed already (registry_ held).
  TrackedFile* find_live_file(dev_t device, ino_t inode, uint32_t hash) const;
  void (*live_files_changed_)(bool any, bool by_owner) = nullptr;
  WriteTotals released_writes_;  // of files released (registry_ held)
};

}  // namespace appendguard
