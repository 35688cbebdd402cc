// rclone's --vfs-cache-mode, read from the command line of the rclone process serving a mount: the mount
// table shows every rclone mount as "fuse.rclone" whatever its mode, and the modes differ (docs/stores.md):
// `off` takes each file as one upload from 0, `writes`/`full` accept random writes like a local disk.
// Pure: the callers read /proc (shim/mount_guard.cpp at start-up and refresh, cli/mount_probe.cpp).
#pragma once

#include <string>
#include <string_view>

namespace appendguard {

enum class RcloneCacheMode { kUnknown, kOff, kMinimal, kWrites, kFull };

// "off", "minimal", "writes", "full", "unknown".
const char* rclone_cache_mode_name(RcloneCacheMode mode);
// The mode named by a --vfs-cache-mode value; kUnknown for any other text.
RcloneCacheMode parse_rclone_cache_mode(std::string_view value);

// What /proc shows of a process whose comm is "rclone".
struct RcloneProcess {
  std::string cmdline;  // /proc/PID/cmdline: the arguments, each followed by a NUL
  std::string environ;  // /proc/PID/environ (empty when unreadable: another user's process)
  std::string cwd;      // /proc/PID/cwd's target (for a relative mount point; empty if unreadable)
};

// Whether /proc/PID/comm's text names rclone ("rclone", with or without its newline).
bool is_rclone_comm(std::string_view comm);

// The cache mode of `process` if it is an `rclone mount`/`cmount`/`nfsmount` whose arguments name
// `mount_point` (unescaped, as MountEntry holds it; a relative argument is taken from the process's cwd,
// trailing slashes ignored): the last --vfs-cache-mode (`--vfs-cache-mode X` or `--vfs-cache-mode=X`),
// else RCLONE_VFS_CACHE_MODE from its environment, else `off` (rclone's default). kUnknown when the
// process does not serve that mount point.
RcloneCacheMode rclone_mode_serving(const RcloneProcess& process, std::string_view mount_point);

}  // namespace appendguard
