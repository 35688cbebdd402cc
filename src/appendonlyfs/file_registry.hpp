// One mutex per backing inode, shared by every handle open on it, so that "check the end of file,
// then write" is atomic per file while different files are written in parallel.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "profile_rules.hpp"

namespace appendonlyfs {

struct FileLock {
  std::mutex mutex;
  // Guarded by mutex: the handles the busy rule counts (profile_rules.hpp, HandleRules), and how many
  // opens the file has had (a write handle flushed before the latest open was taken over by it).
  OpenHandles open;
  std::uint64_t opens = 0;
};

class FileRegistry {
 public:
  std::shared_ptr<FileLock> acquire(dev_t device, ino_t inode);

 private:
  std::mutex mutex_;
  std::map<std::pair<dev_t, ino_t>, std::weak_ptr<FileLock>> files_;
};

}  // namespace appendonlyfs
