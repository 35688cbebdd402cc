#include "core/rclone_cmdline.h"

#include <vector>

namespace appendguard {
namespace {

std::vector<std::string_view> split_nul(std::string_view text) {
  std::vector<std::string_view> items;
  while (!text.empty()) {
    size_t nul = text.find('\0');
    items.push_back(text.substr(0, nul));
    text.remove_prefix(nul == std::string_view::npos ? text.size() : nul + 1);
  }
  return items;
}

std::string_view strip_trailing_slashes(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return path;
}

bool names_mount_point(std::string_view arg, std::string_view cwd, std::string_view mount_point) {
  if (arg.empty()) return false;
  arg = strip_trailing_slashes(arg);
  if (arg.front() == '/') return arg == mount_point;
  if (cwd.empty()) return false;
  if (arg.starts_with("./")) arg.remove_prefix(2);
  std::string full(strip_trailing_slashes(cwd));
  if (full != "/") full += '/';
  full += arg;
  return full == mount_point;
}

}  // namespace

const char* rclone_cache_mode_name(RcloneCacheMode mode) {
  switch (mode) {
    case RcloneCacheMode::kOff:
      return "off";
    case RcloneCacheMode::kMinimal:
      return "minimal";
    case RcloneCacheMode::kWrites:
      return "writes";
    case RcloneCacheMode::kFull:
      return "full";
    case RcloneCacheMode::kUnknown:
      break;
  }
  return "unknown";
}

RcloneCacheMode parse_rclone_cache_mode(std::string_view value) {
  if (value == "off") return RcloneCacheMode::kOff;
  if (value == "minimal") return RcloneCacheMode::kMinimal;
  if (value == "writes") return RcloneCacheMode::kWrites;
  if (value == "full") return RcloneCacheMode::kFull;
  return RcloneCacheMode::kUnknown;
}

bool is_rclone_comm(std::string_view comm) {
  if (comm.ends_with('\n')) comm.remove_suffix(1);
  return comm == "rclone";
}

RcloneCacheMode rclone_mode_serving(const RcloneProcess& process, std::string_view mount_point) {
  constexpr std::string_view kFlag = "--vfs-cache-mode";
  std::vector<std::string_view> args = split_nul(process.cmdline);
  bool mount_command = false;
  bool serves = false;
  bool flag_seen = false;
  RcloneCacheMode mode = RcloneCacheMode::kOff;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "mount" || arg == "cmount" || arg == "nfsmount") {
      mount_command = true;
    } else if (arg == kFlag && i + 1 < args.size()) {
      mode = parse_rclone_cache_mode(args[++i]);
      flag_seen = true;
    } else if (arg.starts_with(kFlag) && arg.size() > kFlag.size() && arg[kFlag.size()] == '=') {
      mode = parse_rclone_cache_mode(arg.substr(kFlag.size() + 1));
      flag_seen = true;
    } else if (names_mount_point(arg, process.cwd, mount_point)) {
      serves = true;
    }
  }
  if (!mount_command || !serves) return RcloneCacheMode::kUnknown;
  if (!flag_seen) {
    constexpr std::string_view kVariable = "RCLONE_VFS_CACHE_MODE=";
    for (std::string_view item : split_nul(process.environ)) {
      if (item.starts_with(kVariable)) mode = parse_rclone_cache_mode(item.substr(kVariable.size()));
    }
  }
  return mode;
}

}  // namespace appendguard
