#include "core/file_table.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <new>

namespace appendguard {

__attribute__((tls_model("initial-exec"))) constinit thread_local TrackedFile* t_held_file = nullptr;

constinit Description g_closed_by_program{};

namespace {

// pthread_sigmask is in libc only since glibc 2.32 (libpthread before), and the library hooks it: the
// system call, made through libc's own syscall() (pool_system_call, set by FileTable::use_system_call; our
// hook of it until the shim sets it at start-up). Only the first 64 signals exist on x86-64 (_NSIG / 8).
static_assert(_NSIG / 8 == sizeof(uint64_t));
void set_signal_mask(int how, const uint64_t* set, uint64_t* old) {
  pool_system_call(SYS_rt_sigprocmask, how, set, old, _NSIG / 8);
}
// What sigfillset gives, computed once: every signal but the two glibc uses internally (SIGCANCEL, 32,
// and SIGSETXID, 33), which a blocked set must leave alone (setuid in another thread waits for them).
constexpr uint64_t kAllSignals = ~((uint64_t{1} << (32 - 1)) | (uint64_t{1} << (33 - 1)));

// The registry lock with every signal blocked: a handler that opens or closes a file must not wait for
// the registry its own thread holds.
class RegistryGuard {
 public:
  explicit RegistryGuard(Lock& lock) : lock_(lock) {
    set_signal_mask(SIG_BLOCK, &kAllSignals, &old_);
    lock_.lock();
  }
  ~RegistryGuard() {
    lock_.unlock();
    set_signal_mask(SIG_SETMASK, &old_, nullptr);
  }
  RegistryGuard(const RegistryGuard&) = delete;
  RegistryGuard& operator=(const RegistryGuard&) = delete;

 private:
  Lock& lock_;
  uint64_t old_;
};

// A file's lock, unless this thread already holds it in the call a signal handler interrupted: that call
// is suspended until the handler returns, so the handler may touch the file's state without it.
class FileLockGuard {
 public:
  explicit FileLockGuard(TrackedFile* file) : file_(t_held_file == file ? nullptr : file) {
    if (file_) file_->lock.lock();
  }
  ~FileLockGuard() {
    if (file_) file_->lock.unlock();
  }
  FileLockGuard(const FileLockGuard&) = delete;
  FileLockGuard& operator=(const FileLockGuard&) = delete;

 private:
  TrackedFile* file_;
};

// The buffers of paths that do not fit in Description::short_path: one pool per size, 128 bytes to a page.
// The last byte of a buffer is never anything but NUL (a path fills at most all but it), so a reader racing a
// recycle reads a string that ends within its buffer (a path being written, another one, or zeros), never
// past it.
char g_no_path[1] = "";
size_t path_class(size_t bytes) {  // 1 <= bytes <= kMaxPath: the smallest c with 128 << c >= bytes
  return bytes <= 128 ? 0 : static_cast<size_t>(64 - __builtin_clzll(bytes - 1) - 7);
}

}  // namespace

void FileTable::use_system_call(long (*system_call)(long, ...)) {
  if (system_call) pool_system_call = system_call;
}

SeekSite* Description::seek_site_for_recording() {
  if (SeekSite* s = seek_site_.load(std::memory_order_acquire)) return s;
  void* memory = map_memory(sizeof(SeekSite));
  if (!memory) return nullptr;
  auto* made = new (memory) SeekSite();
  SeekSite* expected = nullptr;
  if (seek_site_.compare_exchange_strong(expected, made, std::memory_order_acq_rel)) return made;
  unmap_memory(memory, sizeof(SeekSite));  // another thread made one first
  return expected;
}

// Inlined, as are acquire_file and index_live_file, into track, their one caller (issue 27: their calls and
// saved registers were about 50 instructions of every guarded open).
[[gnu::always_inline]] inline void FileTable::set_path(Description* d, const char* path, size_t length) {
  size_t n = length ? length : std::strlen(path);
  if (n >= kMaxPath) n = kMaxPath - 1;
  char* buffer;
  size_t c;
  if (n < kShortPath) {
    buffer = d->short_path;
    c = kInlinePathClass;
  } else {
    c = path_class(n + 1);
    buffer = static_cast<char*>(paths_[c].allocate());
  }
  if (!buffer) {
    d->path = g_no_path;
    d->path_class = kNoPathClass;
    d->path_length = 0;
    return;
  }
  std::memcpy(buffer, path, n);
  buffer[n] = '\0';
  d->path = buffer;
  d->path_class = static_cast<uint8_t>(c);
  d->path_length = static_cast<uint16_t>(n);
}

void FileTable::recycle_unpinned(Description* d) {
  RegistryGuard guard(registry_);
  recycle_description(d, false);
}

namespace {

// 32 bits: the index never has 2^32 slots (twice the live files at most, plus room to grow).
uint32_t identity_hash(dev_t device, ino_t inode) {
  uint64_t h = (static_cast<uint64_t>(inode) * 0x9E3779B97F4A7C15ULL) ^
               (static_cast<uint64_t>(device) * 0xC2B2AE3D27D4EB4FULL);
  return static_cast<uint32_t>(h ^ (h >> 29));
}

}  // namespace

TrackedFile* FileTable::find_live_file(dev_t device, ino_t inode) const {
  return find_live_file(device, inode, identity_hash(device, inode));
}

TrackedFile* FileTable::find_live_file(dev_t device, ino_t inode, uint32_t hash) const {
  if (file_index_capacity_ == 0) return nullptr;
  const size_t mask = file_index_capacity_ - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    TrackedFile* f = file_index_[i];
    if (!f || (f->device == device && f->inode == inode)) return f;
  }
}

// The index and the list of live files are mapped (not malloc'd: a signal handler may open a file) and
// read only with the registry held, so an old one is unmapped as soon as it is replaced; both shrink as
// the live files go (a quarter of the index's slots in use, or less; an eighth of the list's), so that
// their memory comes back too.
constexpr size_t kPointerBytes = sizeof(void*);  // the index and the list hold TrackedFile pointers

bool FileTable::rebuild_index(size_t capacity) {
  auto* rebuilt = static_cast<TrackedFile**>(map_memory(capacity * kPointerBytes));
  if (!rebuilt) return false;
  for (size_t i = 0; i < live_file_count_; ++i) {
    TrackedFile* f = live_files_[i];
    size_t slot = f->index_hash & (capacity - 1);
    while (rebuilt[slot]) slot = (slot + 1) & (capacity - 1);
    rebuilt[slot] = f;
  }
  unmap_memory(file_index_, file_index_capacity_ * kPointerBytes);
  file_index_ = rebuilt;
  file_index_capacity_ = capacity;
  return true;
}

bool FileTable::resize_live_files(size_t capacity) {
  auto* resized = static_cast<TrackedFile**>(map_memory(capacity * kPointerBytes));
  if (!resized) return false;
  if (live_file_count_) std::memcpy(resized, live_files_, live_file_count_ * kPointerBytes);
  unmap_memory(live_files_, live_file_capacity_ * kPointerBytes);
  live_files_ = resized;
  live_file_capacity_ = capacity;
  return true;
}

namespace {
constexpr size_t kSmallestLiveFiles = 512;  // a page of pointers: the index and the list never shrink below
}  // namespace

[[gnu::always_inline]] inline bool FileTable::index_live_file(TrackedFile* file) {
  if ((live_file_count_ + 1) * 2 > file_index_capacity_ &&
      !rebuild_index(file_index_capacity_ ? file_index_capacity_ * 2 : 512))
    return false;
  const size_t mask = file_index_capacity_ - 1;
  size_t slot = file->index_hash & mask;
  while (file_index_[slot]) slot = (slot + 1) & mask;
  file_index_[slot] = file;
  return true;
}

[[gnu::always_inline]] inline void FileTable::unindex_live_file(TrackedFile* file) {
  if (file_index_capacity_ == 0) return;
  const size_t mask = file_index_capacity_ - 1;
  size_t hole = file->index_hash & mask;
  while (file_index_[hole] && file_index_[hole] != file) hole = (hole + 1) & mask;
  if (!file_index_[hole]) return;
  file_index_[hole] = nullptr;
  // Linear probing's deletion: every entry after the hole that may not stay where it is moves into it.
  for (size_t j = (hole + 1) & mask; file_index_[j]; j = (j + 1) & mask) {
    size_t home = file_index_[j]->index_hash & mask;
    bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    file_index_[hole] = file_index_[j];
    file_index_[j] = nullptr;
    hole = j;
  }
}

[[gnu::always_inline]] inline TrackedFile* FileTable::acquire_file(dev_t device, ino_t inode, uint64_t size,
                                                                   bool& created) {
  created = false;
  const uint32_t hash = identity_hash(device, inode);
  if (TrackedFile* f = find_live_file(device, inode, hash)) {
    ++f->descriptions;
    if (live_files_changed_) live_files_changed_(true, false);  // the opening thread's selector (auto)
    return f;
  }
  if (live_file_count_ == live_file_capacity_ &&
      !resize_live_files(live_file_capacity_ ? live_file_capacity_ * 2 : 512))
    return nullptr;
  void* memory = files_.allocate();
  if (!memory) return nullptr;
  auto* f = new (memory) TrackedFile;
  f->device = device;
  f->inode = inode;
  f->index_hash = hash;
  f->end_of_file = size;
  f->descriptions = 1;
  if (!index_live_file(f)) {
    files_.release(f);
    return nullptr;
  }
  f->live_index = live_file_count_;
  live_files_[live_file_count_++] = f;
  live_file_count_published_.store(live_file_count_, std::memory_order_relaxed);
  created = true;
  // Every new file, not only the first: a child sharing our memory (vfork) that released files of the
  // table may have told the callback there were none left.
  if (live_files_changed_) live_files_changed_(true, false);
  return f;
}

// Constructed only in fresh memory: a recycled description is reused as it is, since a guarded call racing
// its close may still be loading `refs` (0 until attach_and_publish's release store) to pin it. Every other
// field is assigned by track or by track_reserved's caller and attach_and_publish; the atomic ones
// atomically.
[[gnu::always_inline]] inline Description* FileTable::allocate_description() {
  bool fresh = false;
  void* memory = descriptions_.allocate(fresh);
  if (!memory) return nullptr;
  return fresh ? new (memory) Description : static_cast<Description*>(memory);
}

Description* FileTable::track(int fd, const OpenRecord& record) {
  std::atomic<Description*>* slot = slots_.reserve_slot(fd);  // null if fd is out of range
  if (!slot) return nullptr;
  RegistryGuard guard(registry_);
  bool created;
  TrackedFile* file = acquire_file(record.device, record.inode, record.size, created);
  if (!file) return nullptr;
  Description* d = allocate_description();
  if (!d) {
    release_file(file, false);
    return nullptr;
  }
  d->position = record.position;
  d->program_appends = record.program_appends;
  d->kernel_appends = record.kernel_appends;
  d->store_renames = record.store_renames;
  d->readable_by_program = record.readable_by_program;
  d->shares_offset.store(record.shares_offset && !record.kernel_appends, std::memory_order_relaxed);
  d->starts_session = record.starts_session;
  d->reused_session = record.reused_session;
  if (record.site) {
    copy_open_site(d->site, *record.site);
  } else {
    d->site = OpenSite{};
  }
  return attach_and_publish(slot, fd, d, file, created, record);
}

Description* FileTable::allocate_reserved_description() {
  RegistryGuard guard(registry_);  // none put aside (the first open, or another thread took it)
  return allocate_description();
}

Description* FileTable::track_reserved(int fd, Description* d, const OpenedFile& opened) {
  std::atomic<Description*>* slot = slots_.reserve_slot(fd);  // null if fd is out of range
  RegistryGuard guard(registry_);
  bool created;
  TrackedFile* file = slot ? acquire_file(opened.device, opened.inode, opened.size, created) : nullptr;
  if (!file) {
    descriptions_.release(d);  // never published: no other thread knows it
    return nullptr;
  }
  // The next open's description, allocated here, under the lock this open takes anyway.
  if (!spare_.load(std::memory_order_relaxed))
    spare_.store(allocate_description(), std::memory_order_release);
  return attach_and_publish(slot, fd, d, file, created, opened);
}

[[gnu::always_inline]] inline Description* FileTable::attach_and_publish(std::atomic<Description*>* slot,
                                                                         int fd, Description* d,
                                                                         TrackedFile* file, bool created,
                                                                         const OpenedFile& opened) {
  // A file tracked just now holds the opened size and reserves nothing, and no other thread can reach it
  // (only through the registry we hold, or a description, and none refers to it yet): no lock.
  if (!created) {
    // A file already open here may have bytes the filesystem does not report yet (HDFS shows only
    // flushed data), so the larger end wins, unless this open truncated the file. A size within a
    // deferred preallocation is not the program's bytes: the kernel may hold the reserved zeros already
    // (shim/deferred_prealloc.cpp), and the writes go on where the program's bytes end.
    FileLockGuard file_guard(file);
    const bool within_reservation = file->reserved_size != 0 && opened.size <= file->reserved_size;
    if (opened.truncated || file->descriptions == 1 ||
        (opened.size > file->end_of_file && !within_reservation)) {
      file->end_of_file = opened.size;
    }
    if (opened.truncated) file->reserved_size = 0;
  }
  d->file = file;
  d->reported_once = 0;
  d->read_failed = false;
  d->commit_requested.store(false, std::memory_order_relaxed);
  d->descriptors = 1;
  // seek_site_ is null already: zeros in fresh memory, and recycle_description clears it.
  set_path(d, opened.path, opened.path_length);
  d->refs.store(1, std::memory_order_release);

  Description* previous = slot->exchange(d, std::memory_order_acq_rel);
  // The kernel reused an fd we never saw closed (or a held session answers this open).
  if (previous && previous != closed_by_program()) release_description(previous);
  if (fd + 1 > highest_fd_plus_one_.load(std::memory_order_relaxed))
    highest_fd_plus_one_.store(fd + 1, std::memory_order_relaxed);
  return d;
}

// Inlined into its two callers (a close's recycle_description on every guarded file's last close):
// the call and its saved registers were ~17 instructions of each.
[[gnu::always_inline]] inline void FileTable::release_file(TrackedFile* file, bool by_owner) {
  if (--file->descriptions > 0) return;
  if (file->live_index < live_file_count_ && live_files_[file->live_index] == file) {
    unindex_live_file(file);
    TrackedFile* last = live_files_[--live_file_count_];
    live_files_[file->live_index] = last;
    last->live_index = file->live_index;
    live_file_count_published_.store(live_file_count_, std::memory_order_relaxed);
    // The index shrinks when a quarter of its slots or less are in use, the list at an eighth, neither below
    // its smallest (tested here, inline: a call at every close with 10,000 files open cost 16 instructions).
    const size_t eightfold = live_file_count_ * 8;
    if (file_index_capacity_ > kSmallestLiveFiles && eightfold <= file_index_capacity_)
      rebuild_index(file_index_capacity_ / 2);
    if (live_file_capacity_ > kSmallestLiveFiles && eightfold <= live_file_capacity_)
      resize_live_files(live_file_capacity_ / 2);
  }
  if (live_file_count_ == 0 && live_files_changed_) live_files_changed_(false, by_owner);
  // No call is writing to it: its last description is recycled only once no guarded call pins it. Read,
  // not reset: acquire_file constructs every file it hands out anew.
  released_writes_.writes += __atomic_load_n(&file->writes, __ATOMIC_RELAXED);
  released_writes_.bytes += __atomic_load_n(&file->bytes_written, __ATOMIC_RELAXED);
  files_.release(file);
}

// Inlined into forget (every guarded close: the calls of it and of recycle_description, with their saved
// registers, were about 40 instructions of each); the other callers share release_description.
[[gnu::always_inline]] inline void FileTable::drop_descriptor(Description* d, bool by_owner) {
  if (--d->descriptors > 0) return;
  if (d->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) recycle_description(d, by_owner);
}

void FileTable::release_description(Description* d) {
  drop_descriptor(d, false);
}

// No call uses `d` any more (no descriptor, no pin): its memory, its path's and its seek site's go back.
// A reader that found it before (a racing close) may still read it: the description's page stays mapped
// (zeros once returned), and so do the path buffers; the seek site is read only by pinned calls.
[[gnu::always_inline]] inline void FileTable::recycle_description(Description* d, bool by_owner) {
  release_file(d->file, by_owner);
  if (d->path_class < kPathClasses) paths_[d->path_class].release(d->path);
  d->path = g_no_path;
  d->path_class = kNoPathClass;
  if (SeekSite* s = d->seek_site_.load(std::memory_order_acquire)) {  // few descriptions have one
    d->seek_site_.store(nullptr, std::memory_order_relaxed);
    unmap_memory(s, sizeof(SeekSite));
  }
  descriptions_.release(d);
}

void FileTable::alias(int old_fd, int new_fd) {
  if (new_fd < 0 || new_fd >= kMaxTrackedFd || old_fd == new_fd) return;
  RegistryGuard guard(registry_);
  Description* d = lookup(old_fd);
  if (d) ++d->descriptors;
  Description* previous = slots_[new_fd].exchange(d, std::memory_order_acq_rel);
  if (previous && previous != closed_by_program()) release_description(previous);
  if (d && new_fd + 1 > highest_fd_plus_one_.load(std::memory_order_relaxed)) {
    highest_fd_plus_one_.store(new_fd + 1, std::memory_order_relaxed);
  }
}

bool FileTable::forget(int fd) {
  std::atomic<Description*>* slot = slots_.existing_slot(fd);  // null if fd is out of range
  if (!slot || !slot->load(std::memory_order_relaxed)) return false;
  RegistryGuard guard(registry_);
  Description* previous = slot->exchange(nullptr, std::memory_order_acq_rel);
  if (!previous || previous == closed_by_program()) return false;
  drop_descriptor(previous, true);  // only the owning process calls forget (file_table.h)
  return true;
}

void FileTable::close_for_program(int fd) {
  if (fd < 0 || fd >= kMaxTrackedFd) return;
  RegistryGuard guard(registry_);
  Description* previous = slots_[fd].exchange(closed_by_program(), std::memory_order_acq_rel);
  if (previous && previous != closed_by_program()) release_description(previous);
  if (fd + 1 > highest_fd_plus_one_.load(std::memory_order_relaxed))
    highest_fd_plus_one_.store(fd + 1, std::memory_order_relaxed);
}

void FileTable::clear_closed_by_program(int fd) {
  if (fd < 0 || fd >= kMaxTrackedFd) return;
  Description* expected = closed_by_program();
  slots_[fd].compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
}

void FileTable::forget_range(unsigned first, unsigned last) {
  int highest = highest_fd();
  if (highest < 0 || first > static_cast<unsigned>(highest)) return;
  if (last > static_cast<unsigned>(highest)) last = static_cast<unsigned>(highest);
  RegistryGuard guard(registry_);
  for (int fd = next_slot(static_cast<int>(first), static_cast<int>(last)); fd <= static_cast<int>(last);
       fd = next_slot(fd + 1, static_cast<int>(last))) {
    Description* previous = slots_[fd].exchange(nullptr, std::memory_order_acq_rel);
    if (previous && previous != closed_by_program()) release_description(previous);
  }
}

bool FileTable::is_last_descriptor_of_file(int fd) {
  RegistryGuard guard(registry_);
  Description* d = lookup(fd);
  return d && d->descriptors == 1 && d->file && d->file->descriptions == 1;
}

bool FileTable::tracks_file(dev_t device, ino_t inode) {
  RegistryGuard guard(registry_);
  return find_live_file(device, inode) != nullptr;
}

size_t FileTable::descriptors_of_file(dev_t device, ino_t inode, int* out, size_t capacity) {
  RegistryGuard guard(registry_);
  size_t count = 0;
  int highest = highest_fd();
  for (int fd = next_slot(0, highest); fd <= highest; fd = next_slot(fd + 1, highest)) {
    Description* d = lookup(fd);
    if (!d || d->file->device != device || d->file->inode != inode) continue;
    if (count < capacity) out[count] = fd;
    ++count;
  }
  return count;
}

bool FileTable::end_of_file_of(dev_t device, ino_t inode, uint64_t& end_of_file) {
  RegistryGuard guard(registry_);
  TrackedFile* f = find_live_file(device, inode);
  if (!f) return false;
  FileLockGuard file_guard(f);
  end_of_file = f->end_of_file;
  return true;
}

void FileTable::set_end_of_file(dev_t device, ino_t inode, uint64_t end_of_file) {
  RegistryGuard guard(registry_);
  if (TrackedFile* f = find_live_file(device, inode)) {
    FileLockGuard file_guard(f);
    f->end_of_file = end_of_file;
  }
}

// The registry is held across fork with signals blocked (the mask is restored on both sides).
void FileTable::before_fork() {
  uint64_t old;
  set_signal_mask(SIG_BLOCK, &kAllSignals, &old);
  registry_.lock();
  mask_before_fork_ = old;
}

void FileTable::mark_offsets_shared() {
  int highest = highest_fd();
  for (int fd = next_slot(0, highest); fd <= highest; fd = next_slot(fd + 1, highest)) {
    Description* d = slots_[fd].load(std::memory_order_relaxed);
    if (d && d != closed_by_program() && !d->kernel_appends) {
      d->shares_offset.store(true, std::memory_order_relaxed);
    }
  }
}

void FileTable::after_fork_parent() {
  mark_offsets_shared();
  uint64_t old = mask_before_fork_;
  registry_.unlock();
  set_signal_mask(SIG_SETMASK, &old, nullptr);
}

WriteTotals FileTable::write_totals() {
  RegistryGuard guard(registry_);
  WriteTotals totals = released_writes_;
  for (size_t i = 0; i < live_file_count_; ++i) {
    totals.writes += __atomic_load_n(&live_files_[i]->writes, __ATOMIC_RELAXED);
    totals.bytes += __atomic_load_n(&live_files_[i]->bytes_written, __ATOMIC_RELAXED);
  }
  return totals;
}

void FileTable::after_fork_child() {
  registry_.reset_in_child();
  released_writes_ = {};  // the child's summary counts its own writes
  for (size_t i = 0; i < live_file_count_; ++i) {
    live_files_[i]->lock.reset_in_child();
    __atomic_store_n(&live_files_[i]->writes, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&live_files_[i]->bytes_written, 0, __ATOMIC_RELAXED);
  }
  mark_offsets_shared();
  set_signal_mask(SIG_SETMASK, &mask_before_fork_, nullptr);
}

}  // namespace appendguard
