// `appendguard doctor DIR`: which mount holds DIR, what it accepts (a probe of each append-only rule with
// a scratch file), and what will work with and without the library. The parsing and the advice are pure
// (unit-tested); probe_directory does the system calls.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/mount_table.h"

namespace appendguard {

struct MountInfo {
  MountEntry entry;
  std::string options;        // per-mount options ("rw,nosuid,nodev")
  std::string super_options;  // the file system's ("rw,user_id=0,group_id=0")
};

// The mount of `mountinfo` (the text of /proc/self/mountinfo) holding the absolute, resolved `path`: the
// longest mount point that is a prefix of it, the later line winning (mounted over). False if none.
bool mount_of(std::string_view mountinfo, std::string_view path, MountInfo& out);

enum class Rule {
  kCreate,         // create a new file and write to it
  kReadWriteOpen,  // O_RDWR open of an existing file
  kWriteOnlyOpen,  // O_WRONLY open of an existing file, without O_TRUNC
  kAppend,         // O_WRONLY|O_APPEND open and a write at the end
  kWriteBelowEnd,  // pwrite at offset 0 of a non-empty file
  kTruncate,       // ftruncate below the end
  kFallocate,      // fallocate mode 0 past the end
  kRename,         // rename to a new name
  kRenameOntoExisting,
};
constexpr int kRuleCount = 9;

struct ProbeResult {
  Rule rule;
  int error = 0;  // 0: accepted (the call and the close); else the errno
  std::string detail;
};

const char* rule_name(Rule rule);

// What the library does about a rule, given what the mount did without it (all the probe's results, for
// the fall-backs: the rewrite reopen needs a truncating open). One line.
std::string with_library(Rule rule, const std::vector<ProbeResult>& results);

// The settings recommended for `mount` after `results`, one per line; `known` tells whether the library
// already guards every file of this mount (core/mount_table.h's known stores).
std::vector<std::string> recommendations(const MountInfo& mount, bool known,
                                         const std::vector<ProbeResult>& results);

// Runs every rule with scratch files in `dir` (removed afterwards). Empty with `error` set when no scratch
// file can be created there.
std::vector<ProbeResult> probe_directory(const std::string& dir, std::string& error);

}  // namespace appendguard
