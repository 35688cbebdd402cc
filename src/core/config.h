// Configuration read from the environment once, at load. Pure: the lookup function is injected so that
// every accepted and rejected form can be unit-tested without touching the real environment.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/glob.h"
#include "core/mount_table.h"

namespace appendguard {

enum class Mode { kOff, kEnforce, kAudit };
enum class Action { kError, kAbort, kWarn };
// How enforce mode reopens an existing file for writing: with O_APPEND (HDFS and most stores), or by
// truncating it and writing its bytes back (stores that cannot append but replace a file atomically
// when it is closed, such as mountpoint-s3).
// kAuto (the default) chooses by the file's store (docs/stores.md): hold on write-once stores, append
// elsewhere. kHold keeps a session this process started open across the program's close and reuses it
// for the next write open (files started by another process are rewritten).
enum class Reopen { kAuto, kAppend, kRewrite, kHold };
// What enforce mode does with a call that only grows a guarded file (ftruncate up, fallocate): record the
// size and fill it with zeros at the last close (defer), or refuse it as the mount would.
enum class Prealloc { kDefer, kRefuse };
// APPENDGUARD_SYSCALLS: the raw-system-call layer (shim/syscall_dispatch.h). kAuto traps the system calls
// made outside libc only in the threads that opened or created a guarded file, while one is open;
// kAlways traps them in every thread from start-up; kOff never.
enum class SyscallLayer { kAuto, kAlways, kOff };
// APPENDGUARD_IO_URING: a raw io_uring_setup/io_setup trapped in a process that writes guarded files:
// refused with ENOSYS (the program falls back to plain writes, which are guarded), or allowed (its
// writes are then not seen). One line either way.
enum class IoUring { kRefuse, kAllow };

// How enforce mode writes to a file on a store of `kind` under `reopen` (the one decision used by the
// library, shim/held_sessions.cpp hold_mode_for, and by `appendguard doctor DIR`): kHold, a file this
// process created or truncated is held at close and reused by its next write open, and an existing file
// opened keeping its bytes is written anew; kRewrite, never held, an existing file opened keeping its
// bytes is written anew; kAppend, an existing file is reopened with O_APPEND.
enum class ReopenChoice { kAppend, kRewrite, kHold };
inline ReopenChoice reopen_choice(Reopen reopen, StoreKind kind) {
  switch (reopen) {
    case Reopen::kHold:
      return ReopenChoice::kHold;
    case Reopen::kAuto:
      return kind == StoreKind::kWriteOnce ? ReopenChoice::kHold : ReopenChoice::kAppend;
    case Reopen::kRewrite:
      return ReopenChoice::kRewrite;
    case Reopen::kAppend:
      break;
  }
  return ReopenChoice::kAppend;
}
const char* reopen_choice_name(ReopenChoice choice);
const char* reopen_name(Reopen reopen);

struct Config {
  Mode mode = Mode::kOff;
  Action on_violation = Action::kError;
  int violation_errno = 0;  // filled with EOPNOTSUPP by parse_config
  PatternSet paths;
  std::string log_target;  // "stderr" or a path template with %p %h %r
  int backtrace_frames = 32;
  bool trace = false;
  bool python_stack = true;
  // APPENDGUARD_SUMMARY: one line at exit from a process that touched guarded files; unset, only when
  // APPENDGUARD_LOG is a file.
  bool summary = false;
  bool json = false;  // APPENDGUARD_FORMAT=json: reports, trace lines, notices and summaries as JSON lines
  Reopen reopen = Reopen::kAuto;
  // APPENDGUARD_HOLD_SECONDS: a held write session is committed after this long without a reopen (0: no
  // limit, held until an event commits it; docs/design.md, "Held write sessions").
  unsigned hold_seconds = 60;
  MountSelection mounts;  // APPENDGUARD_FS: mounts on which every written file is guarded
  Prealloc prealloc = Prealloc::kDefer;
  SyscallLayer syscalls = SyscallLayer::kAuto;
  IoUring io_uring = IoUring::kRefuse;
  // APPENDGUARD_SPOOL: the directory of spool files (empty: $TMPDIR, else /tmp); `spool_off`: none (a file
  // created with O_EXCL on a store without rename is written there and copied at its rename).
  std::string spool_dir;
  bool spool_off = false;
};

struct ConfigResult {
  Config config;
  std::string error;  // empty on success; otherwise one line naming the variable, value and what is accepted
  // Lines to say at start-up that do not stop the program: the library is loaded with APPENDGUARD unset
  // while other settings are set, a pattern that cannot match any file (core/pattern_check.h).
  std::vector<std::string> notices;
  bool ok() const { return error.empty(); }
};

using EnvLookup = const char* (*)(const char* name);

// `environment` (NAME=VALUE entries, null-terminated like environ), when given, is checked for unknown
// APPENDGUARD* names (core/variables.h: the table of every name; add a new variable there and to
// docs/reference.md): enabled, an unknown name is an error; inert with APPENDGUARD unset, the settings
// present are a notice.
ConfigResult parse_config(EnvLookup lookup, const char* const* environment = nullptr);

// errno names accepted by APPENDGUARD_ERRNO ("EOPNOTSUPP", "EIO", ... or a positive number).
int errno_from_name(std::string_view name);  // 0 when unknown
const char* errno_name(int err);             // the table's name, else glibc's, else "E?"

const char* mode_name(Mode mode);
const char* action_name(Action action);

}  // namespace appendguard
