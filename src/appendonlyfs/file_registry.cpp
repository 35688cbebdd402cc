#include "file_registry.hpp"

#include <iterator>

namespace appendonlyfs {

std::shared_ptr<FileLock> FileRegistry::acquire(dev_t device, ino_t inode) {
  std::lock_guard lock(mutex_);
  auto& slot = files_[{device, inode}];
  if (auto existing = slot.lock()) return existing;
  auto created = std::make_shared<FileLock>();
  slot = created;
  if (files_.size() > 1024) {
    for (auto it = files_.begin(); it != files_.end();) {
      it = it->second.expired() ? files_.erase(it) : std::next(it);
    }
  }
  return created;
}

}  // namespace appendonlyfs
