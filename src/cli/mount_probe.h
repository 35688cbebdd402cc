// `appendguard doctor DIR`: which mount holds DIR, what it accepts (a probe of each append-only rule with
// a scratch file), and what will work with and without the library. The parsing and the advice are pure
// (unit-tested); probe_directory does the system calls.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
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
// The rclone processes /proc shows (for an rclone mount's --vfs-cache-mode, as the library reads it).
std::vector<RcloneProcess> read_rclone_processes();

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
// the fall-backs: the rewrite reopen needs a truncating open) and how it reopens files there
// (core/config.h reopen_choice: the same decision the library makes), and whether the store renames
// (core/mount_table.h store_renames: a rename it refuses is carried out by the library, core/rename_plan.h).
// One line.
std::string with_library(Rule rule, const std::vector<ProbeResult>& results, ReopenChoice choice,
                         bool store_renames = true);

// One line saying what `choice` means for a file of this directory.
std::string describe_reopen(ReopenChoice choice, Reopen setting, StoreKind kind);

// Operations run by /bin/sh and dd on a scratch file, once without the library and once with it
// (measured, not predicted: the launcher is static, so the library's behaviour is seen only in a
// dynamically linked program). `initial` is what the file holds before (nullptr: no file), `expected`
// what it holds after a normal file's success.
struct ShellCase {
  const char* name;
  const char* initial;
  const char* script;  // run by sh -c with the file as $1
  const char* expected;
  bool must_refuse;  // the library must refuse it (a write below the end)
};
const std::vector<ShellCase>& shell_cases();

enum class Outcome {
  kWorks,          // exit 0, the file holds `expected`
  kRefusedLoudly,  // failed, an `appendguard:` line, the file unchanged
  kFailsIntact,    // failed without an `appendguard:` line, the file unchanged
  kWrongBytes,     // exit 0, other bytes than `expected`
  kFileChanged,    // failed, and the file holds other bytes than before
};
const char* outcome_name(Outcome outcome);
Outcome classify_case(const ShellCase& c, bool exited_zero, bool appendguard_line, bool exists,
                      const std::string& content);

// Why the pair (without, with the library) breaks the rule "with the library: identical or a loud
// refusal leaving the file intact, never worse than without; a write below the end refused", or "".
std::string case_problem(const ShellCase& c, Outcome without, Outcome with);

// Runs case `c` in `dir` (scratch file removed): without the library when `library` is empty, else with
// it preloaded and APPENDGUARD=1 unless the environment sets APPENDGUARD (the other APPENDGUARD_*
// settings are the caller's).
Outcome run_shell_case(const ShellCase& c, const std::string& dir, const std::string& library);

// The settings recommended for `mount` after `results`, one per line; `known` tells whether the library
// already guards every file of this mount (core/mount_table.h's known stores); `choice` how it reopens
// files there (never recommended again: a setting that changes nothing is not advice).
std::vector<std::string> recommendations(const MountInfo& mount, bool known,
                                         const std::vector<ProbeResult>& results, ReopenChoice choice);

// Runs every rule with scratch files in `dir` (removed afterwards). Empty with `error` set when no scratch
// file can be created there.
std::vector<ProbeResult> probe_directory(const std::string& dir, std::string& error);

}  // namespace appendguard
