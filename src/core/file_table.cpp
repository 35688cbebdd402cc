#include "core/file_table.h"

#include <cstring>
#include <new>

namespace appendguard {

TrackedFile* FileTable::acquire_file(dev_t device, ino_t inode, uint64_t size) {
  for (size_t i = 0; i < live_file_count_; ++i) {
    TrackedFile* f = live_files_[i];
    if (f->device == device && f->inode == inode) {
      ++f->descriptions;
      return f;
    }
  }
  if (live_file_count_ == live_file_capacity_) {
    size_t capacity = live_file_capacity_ ? live_file_capacity_ * 2 : 64;
    auto* grown = new (std::nothrow) TrackedFile*[capacity];
    if (!grown) return nullptr;
    if (live_file_count_)
      std::memcpy(
          grown, live_files_,
          live_file_count_ *
              sizeof(TrackedFile*));  // NOLINT(bugprone-sizeof-expression): an array of pointers is copied
    // The old array is leaked on purpose: it is small and a reader never sees it freed.
    live_files_ = grown;
    live_file_capacity_ = capacity;
  }
  TrackedFile* f = free_files_;
  if (f) {
    free_files_ = f->next_free;
  } else {
    f = new (std::nothrow) TrackedFile;
    if (!f) return nullptr;
  }
  f->device = device;
  f->inode = inode;
  f->reserved_size = 0;
  f->reserved_by = 0;
  f->end_of_file = size;
  f->descriptions = 1;
  f->next_free = nullptr;
  live_files_[live_file_count_++] = f;
  return f;
}

Description* FileTable::track(int fd, const OpenRecord& record) {
  if (fd < 0 || fd >= kMaxTrackedFd) return nullptr;
  LockGuard guard(registry_);
  TrackedFile* file = acquire_file(record.device, record.inode, record.size);
  if (!file) return nullptr;
  Description* d = free_descriptions_;
  if (d) {
    free_descriptions_ = d->next_free;
  } else {
    d = new (std::nothrow) Description;
    if (!d) {
      release_file(file);
      return nullptr;
    }
  }
  {
    LockGuard file_guard(file->lock);
    // A file already open here may have bytes the filesystem does not report yet (HDFS shows only
    // flushed data), so the larger end wins, unless this open truncated the file.
    if (record.truncated || file->descriptions == 1 || record.size > file->end_of_file) {
      file->end_of_file = record.size;
    }
    if (record.truncated) file->reserved_size = 0;
    d->file = file;
    d->position = record.position;
    d->reported_once = 0;
  }
  d->program_appends = record.program_appends;
  d->kernel_appends = record.kernel_appends;
  d->readable_by_program = record.readable_by_program;
  d->descriptors = 1;
  d->site = record.site ? *record.site : OpenSite{};
  size_t n = std::strlen(record.path);
  if (n >= kMaxPath) n = kMaxPath - 1;
  std::memcpy(d->path, record.path, n);
  d->path[n] = '\0';
  d->next_free = nullptr;

  Description* previous = slots_[fd].exchange(d, std::memory_order_acq_rel);
  if (previous) release_description(previous);  // the kernel reused an fd we never saw closed
  if (fd + 1 > highest_fd_plus_one_.load(std::memory_order_relaxed))
    highest_fd_plus_one_.store(fd + 1, std::memory_order_relaxed);
  return d;
}

void FileTable::release_file(TrackedFile* file) {
  if (--file->descriptions > 0) return;
  for (size_t i = 0; i < live_file_count_; ++i) {
    if (live_files_[i] == file) {
      live_files_[i] = live_files_[--live_file_count_];
      break;
    }
  }
  file->next_free = free_files_;
  free_files_ = file;
}

void FileTable::release_description(Description* d) {
  if (--d->descriptors > 0) return;
  release_file(d->file);
  d->next_free = free_descriptions_;
  free_descriptions_ = d;
}

void FileTable::alias(int old_fd, int new_fd) {
  if (new_fd < 0 || new_fd >= kMaxTrackedFd || old_fd == new_fd) return;
  LockGuard guard(registry_);
  Description* d = lookup(old_fd);
  if (d) ++d->descriptors;
  Description* previous = slots_[new_fd].exchange(d, std::memory_order_acq_rel);
  if (previous) release_description(previous);
  if (d && new_fd + 1 > highest_fd_plus_one_.load(std::memory_order_relaxed)) {
    highest_fd_plus_one_.store(new_fd + 1, std::memory_order_relaxed);
  }
}

bool FileTable::forget(int fd) {
  if (fd < 0 || fd >= kMaxTrackedFd) return false;
  if (!slots_[fd].load(std::memory_order_relaxed)) return false;
  LockGuard guard(registry_);
  Description* previous = slots_[fd].exchange(nullptr, std::memory_order_acq_rel);
  if (!previous) return false;
  release_description(previous);
  return true;
}

void FileTable::forget_range(unsigned first, unsigned last) {
  int highest = highest_fd();
  if (highest < 0 || first > static_cast<unsigned>(highest)) return;
  if (last > static_cast<unsigned>(highest)) last = static_cast<unsigned>(highest);
  LockGuard guard(registry_);
  for (unsigned fd = first; fd <= last; ++fd) {
    Description* previous = slots_[fd].exchange(nullptr, std::memory_order_acq_rel);
    if (previous) release_description(previous);
  }
}

bool FileTable::is_last_descriptor_of_file(int fd) {
  LockGuard guard(registry_);
  Description* d = lookup(fd);
  return d && d->descriptors == 1 && d->file && d->file->descriptions == 1;
}

bool FileTable::end_of_file_of(dev_t device, ino_t inode, uint64_t& end_of_file) {
  LockGuard guard(registry_);
  for (size_t i = 0; i < live_file_count_; ++i) {
    TrackedFile* f = live_files_[i];
    if (f->device == device && f->inode == inode) {
      LockGuard file_guard(f->lock);
      end_of_file = f->end_of_file;
      return true;
    }
  }
  return false;
}

void FileTable::set_end_of_file(dev_t device, ino_t inode, uint64_t end_of_file) {
  LockGuard guard(registry_);
  for (size_t i = 0; i < live_file_count_; ++i) {
    TrackedFile* f = live_files_[i];
    if (f->device == device && f->inode == inode) {
      LockGuard file_guard(f->lock);
      f->end_of_file = end_of_file;
      return;
    }
  }
}

void FileTable::after_fork_child() {
  registry_.reset_in_child();
  for (size_t i = 0; i < live_file_count_; ++i) live_files_[i]->lock.reset_in_child();
}

}  // namespace appendguard
