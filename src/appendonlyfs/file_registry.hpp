// One mutex per backing inode, shared by every handle open on it, so that "check the end of file,
// then write" is atomic per file while different files are written in parallel.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace appendonlyfs {

struct FileLock {
  std::mutex mutex;
};

class FileRegistry {
 public:
  std::shared_ptr<FileLock> acquire(dev_t device, ino_t inode);

 private:
  std::mutex mutex_;
  std::map<std::pair<dev_t, ino_t>, std::weak_ptr<FileLock>> files_;
};

}  // namespace appendonlyfs
