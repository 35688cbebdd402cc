#include "core/mount_table.h"

#include <string.h>  // memmem
#include <sys/sysmacros.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstring>

namespace appendguard {
namespace {

// Append-only or write-once stores recognised without configuration: by mount type, or by the source
// name their FUSE client gives itself (Apache's fuse_dfs and mountpoint-s3 mount as plain "fuse").
constexpr std::array<std::string_view, 6> kKnownTypes = {"fuse.appendonlyfs",    "fuse.fuse_dfs",
                                                         "fuse.hadoop-fuse-dfs", "fuse.mountpoint-s3",
                                                         "fuse.rclone",          "fuse.gcsfuse"};
constexpr std::array<std::string_view, 4> kKnownSources = {"fuse_dfs", "hadoop-fuse-dfs", "mountpoint-s3",
                                                           "gcsfuse"};
// Write-once stores: every file is one sequential upload from offset 0. rclone's cache mode is not in
// mountinfo: it is read from the command line of the rclone process serving the mount
// (core/rclone_cmdline.h); `writes` and `full` are neither write-once nor guarded whole (is_rclone_cached),
// `off`, `minimal` and an rclone process that cannot be seen stay write-once. appendonlyfs puts its
// profile in its source ("appendonlyfs:s3"; "appendonlyfs:volumes" emulates Databricks volumes).
constexpr std::array<std::string_view, 3> kWriteOnceTypes = {"fuse.rclone", "fuse.mountpoint-s3",
                                                             "fuse.gcsfuse"};
constexpr std::array<std::string_view, 4> kWriteOnceSources = {"mountpoint-s3", "gcsfuse", "appendonlyfs:s3",
                                                               "appendonlyfs:volumes"};

// Stores whose rename fails ENOSYS (DESIGN.md section 6): mountpoint-s3 on general purpose buckets,
// Databricks volumes; appendonlyfs's profiles of them put their name in the source.
constexpr std::array<std::string_view, 3> kNoRenameSources = {"mountpoint-s3", "appendonlyfs:s3",
                                                              "appendonlyfs:volumes"};

template <size_t N>
bool contains(const std::array<std::string_view, N>& list, std::string_view word) {
  for (std::string_view item : list) {
    if (item == word) return true;
  }
  return false;
}

// The next space-separated field of [at, end) (runs of spaces between fields), empty at the end of the line.
std::string_view next_field(const char*& at, const char* end) {
  while (at != end && *at == ' ') ++at;
  const char* start = at;
  const void* space = std::memchr(at, ' ', static_cast<size_t>(end - at));
  at = space ? static_cast<const char*>(space) : end;
  return {start, static_cast<size_t>(at - start)};
}

// mountinfo escapes space, tab, newline and backslash as \040, \011, \012, \134 (any three octal digits
// are taken; a backslash not followed by three is kept as it is). Into `out`, reusing its storage.
void unescape_into(std::string_view field, std::string& out) {
  size_t backslash = field.find('\\');
  if (backslash == std::string_view::npos) {  // nearly every line: one copy
    out.assign(field.data(), field.size());
    return;
  }
  out.assign(field.data(), backslash);
  for (size_t i = backslash; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      int value = 0;
      bool octal = true;
      for (size_t k = 1; k <= 3; ++k) {
        char c = field[i + k];
        if (c < '0' || c > '7') octal = false;
        value = value * 8 + (c - '0');
      }
      if (octal) {
        out.push_back(static_cast<char>(value));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
}

bool is_path_prefix(std::string_view mount_point, std::string_view path) {
  if (mount_point == "/") return true;
  return path.starts_with(mount_point) &&
         (path.size() == mount_point.size() || path[mount_point.size()] == '/');
}

}  // namespace

bool is_fuse_type(std::string_view type) {
  return type == "fuse" || type == "fuseblk" || type.starts_with("fuse.") || type.starts_with("fuseblk.");
}

bool is_rclone_cached(const MountEntry& entry) {
  return entry.type == "fuse.rclone" &&
         (entry.rclone_mode == RcloneCacheMode::kWrites || entry.rclone_mode == RcloneCacheMode::kFull);
}

bool has_rclone_mount(std::string_view mountinfo) {
  constexpr std::string_view kRclone = " fuse.rclone ";  // memmem: string_view::find stops at every space
  return memmem(mountinfo.data(), mountinfo.size(), kRclone.data(), kRclone.size()) != nullptr;
}

void set_rclone_mode(MountEntry& entry, const std::vector<RcloneProcess>& processes) {
  if (entry.type != "fuse.rclone") return;
  for (const RcloneProcess& process : processes) {
    RcloneCacheMode mode = rclone_mode_serving(process, entry.mount_point);
    if (mode != RcloneCacheMode::kUnknown) {
      entry.rclone_mode = mode;
      return;
    }
  }
}

StoreKind classify_store(const MountEntry& entry) {
  if (is_rclone_cached(entry)) return StoreKind::kAppends;
  if (contains(kWriteOnceTypes, entry.type)) return StoreKind::kWriteOnce;
  if (is_fuse_type(entry.type) && contains(kWriteOnceSources, entry.source)) return StoreKind::kWriteOnce;
  return StoreKind::kAppends;
}

bool store_renames(const MountEntry& entry) {
  if (entry.type == "fuse.mountpoint-s3") return false;
  return !(is_fuse_type(entry.type) && contains(kNoRenameSources, entry.source));
}

const char* store_kind_name(StoreKind kind) {
  return kind == StoreKind::kWriteOnce ? "write-once" : "appends";
}

std::string parse_mount_selection(std::string_view text, MountSelection& out) {
  out = MountSelection{};
  out.known = false;
  bool saw_none = false;
  size_t words = 0;
  while (true) {
    size_t comma = text.find(',');
    std::string_view word = text.substr(0, comma);
    ++words;
    if (word.empty()) return "an empty item";
    if (word.find_first_of(" \t\n") != std::string_view::npos)
      return "an item with a space (items are separated by commas)";
    if (word == "none") {
      saw_none = true;
    } else if (word == "known") {
      out.known = true;
    } else if (word == "fuse") {
      out.any_fuse = true;
    } else {
      if (word.find('/') != std::string_view::npos && word[0] != '/' &&
          word.find(':') == std::string_view::npos) {
        return "'" + std::string(word) + "' is neither a mount type, a source nor an absolute mount point";
      }
      std::string item(word);
      while (item.size() > 1 && item.back() == '/') item.pop_back();
      out.extra.push_back(std::move(item));
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (saw_none) {
    if (words > 1) return "'none' cannot be combined with other items";
    return {};
  }
  out.known = true;  // every list adds to the known stores
  return {};
}

bool parse_mountinfo_line(std::string_view line, MountEntry& out) {
  // id parent major:minor root mount_point options [optional fields...] - type source super_options
  // One pass over the line, no allocation but the fields kept (issue 27: every new process reads it).
  const char* at = line.data();
  const char* const end = at + line.size();
  std::string_view device;
  for (int i = 0; i < 4; ++i) {
    std::string_view field = next_field(at, end);
    if (field.empty()) return false;
    if (i == 2) device = field;
  }
  out.device = 0;
  if (size_t colon = device.find(':'); colon != std::string_view::npos) {
    unsigned major_number = 0;
    unsigned minor_number = 0;
    std::from_chars(device.data(), device.data() + colon, major_number);
    std::from_chars(device.data() + colon + 1, device.data() + device.size(), minor_number);
    out.device = makedev(major_number, minor_number);
  }
  std::string_view mount_point = next_field(at, end);
  std::string_view options = next_field(at, end);
  if (mount_point.empty() || options.empty()) return false;
  while (true) {
    std::string_view field = next_field(at, end);
    if (field.empty()) return false;
    if (field == "-") break;
  }
  std::string_view type = next_field(at, end);
  std::string_view source = next_field(at, end);
  std::string_view super_options = next_field(at, end);
  if (type.empty()) return false;
  unescape_into(mount_point, out.mount_point);
  out.type.assign(type.data(), type.size());
  unescape_into(source, out.source);
  out.options.assign(options.data(), options.size());
  out.super_options.assign(super_options.data(), super_options.size());
  return true;
}

bool is_append_only_mount(const MountEntry& entry, const MountSelection& selection) {
  if (selection.none()) return false;
  const bool fuse = is_fuse_type(entry.type);
  if (selection.known && !is_rclone_cached(entry) &&
      (contains(kKnownTypes, entry.type) || (fuse && contains(kKnownSources, entry.source)))) {
    return true;
  }
  if (selection.any_fuse && fuse) return true;
  for (const std::string& item : selection.extra) {
    if (item == entry.type || item == entry.source || item == entry.mount_point) return true;
    if (fuse && entry.type == "fuse." + item) return true;  // "rclone" for "fuse.rclone"
  }
  return false;
}

void MountTable::load(std::string_view mountinfo, const MountSelection& selection,
                      const std::vector<RcloneProcess>& rclone) {
  mounts_.clear();
  append_only_count_ = 0;
  unguarded_fuse_count_ = 0;
  while (!mountinfo.empty()) {
    size_t newline = mountinfo.find('\n');
    std::string_view line = mountinfo.substr(0, newline);
    mountinfo.remove_prefix(newline == std::string_view::npos ? mountinfo.size() : newline + 1);
    Mount mount;
    if (!parse_mountinfo_line(line, mount.entry)) continue;
    set_rclone_mode(mount.entry, rclone);
    mount.append_only = is_append_only_mount(mount.entry, selection);
    mount.entry.kind = classify_store(mount.entry);
    mount.entry.renames = store_renames(mount.entry);
    if (mount.append_only) ++append_only_count_;
    if (!mount.append_only && is_fuse_type(mount.entry.type)) ++unguarded_fuse_count_;
    mounts_.push_back(std::move(mount));
  }
  devices_.clear();
  last_known_device_ = 0;
  for (const Mount& mount : mounts_) devices_.push_back(mount.entry.device);
  std::sort(devices_.begin(), devices_.end());
  append_only_scope_.clear();
  append_only_points_.clear();
  std::fill(std::begin(second_chars_), std::end(second_chars_), false);
  for (const Mount& mount : mounts_) {
    if (!mount.append_only) continue;
    const std::string& point = mount.entry.mount_point;
    append_only_points_.push_back(point);
    if (point.size() > 1) {
      second_chars_[static_cast<unsigned char>(point[1])] = true;
    } else {
      std::fill(std::begin(second_chars_), std::end(second_chars_), true);
    }
  }
  facts_scope_.clear();
  any_write_once_ = false;
  auto under = [this](std::string_view mount_point, auto&& of_kind) {
    for (const Mount& m : mounts_) {
      if (of_kind(m) && is_path_prefix(m.entry.mount_point, mount_point)) return true;
    }
    return false;
  };
  for (size_t i = 0; i < mounts_.size(); ++i) {
    const std::string_view point = mounts_[i].entry.mount_point;
    const Point p{point.size(), i};
    if (under(point, [](const Mount& m) { return m.append_only; })) append_only_scope_.push_back(p);
    if (mounts_[i].entry.kind == StoreKind::kWriteOnce) any_write_once_ = true;
    // The longest prefix among the mounts on or under one of either kind is the longest among all mounts
    // whenever that one is in this scope; when it is not, no mount of the scope is a prefix of the path
    // (the path's own mount would be under it, so in the scope): the defaults, as they should be.
    if (under(point,
              [](const Mount& m) { return m.entry.kind == StoreKind::kWriteOnce || !m.entry.renames; }))
      facts_scope_.push_back(p);
  }
}

const MountTable::Mount* MountTable::longest_prefix(const std::vector<Point>& scope,
                                                    std::string_view path) const {
  const Mount* best = nullptr;
  size_t best_size = 0;
  for (const Point& point : scope) {
    // ">=": of two mounts on one point the later one is on top. A point longer than the path, or shorter
    // than the best found, is not compared.
    if (point.size > path.size() || point.size < best_size) continue;
    const Mount* mount = &mounts_[point.index];
    const char* chars = mount->entry.mount_point.data();
    if (point.size == 1) {  // "/" (mount points are absolute)
      if (chars[0] != '/') continue;
    } else if ((point.size != path.size() && path[point.size] != '/') ||
               chars[point.size - 1] != path[point.size - 1] ||
               std::memcmp(chars, path.data(), point.size - 1) != 0) {
      continue;  // the path goes on inside a component, or ends differently: no memcmp for most mounts
    }
    best = mount;
    best_size = point.size;
  }
  return best;
}

const MountEntry* MountTable::append_only_mount_of(std::string_view path) const {
  if (append_only_count_ == 0) return nullptr;
  const Mount* best = longest_prefix(append_only_scope_, path);
  return best && best->append_only ? &best->entry : nullptr;
}

bool MountTable::under_append_only_point(const SplitPath& path) const {
  for (const std::string& point : append_only_points_) {
    if (split_path_under(path, point)) return true;
  }
  return false;
}

bool MountTable::knows_device_slowly(dev_t device) const {
  std::atomic_ref<size_t> last(last_known_device_);
  auto found = std::lower_bound(devices_.begin(), devices_.end(), device);
  if (found == devices_.end() || *found != device) return false;
  last.store(static_cast<size_t>(found - devices_.begin()), std::memory_order_relaxed);
  return true;
}

StoreKind MountTable::store_kind_of(std::string_view path) const {
  return any_write_once_ ? facts_of(path).kind : StoreKind::kAppends;
}

bool MountTable::renames_at(std::string_view path) const {
  return facts_of(path).renames;
}

MountFacts MountTable::facts_of(std::string_view path) const {
  MountFacts facts;
  if (facts_scope_.empty()) return facts;
  if (const Mount* mount = longest_prefix(facts_scope_, path)) {
    facts.kind = mount->entry.kind;
    facts.renames = mount->entry.renames;
    facts.caches_read_write =
        mount->entry.type == "fuse.rclone" && mount->entry.rclone_mode == RcloneCacheMode::kMinimal;
  }
  return facts;
}

bool MountTable::clear_of_append_only_mounts(std::string_view directory) const {
  if (directory.empty() || directory[0] != '/') return false;
  for (const std::string& point : append_only_points_) {
    // The point is the directory or one of its ancestors (every path under it is on it), or under it
    // (a path under the directory may lead there).
    if (is_path_prefix(point, directory) || is_path_prefix(directory, point)) return false;
  }
  return true;
}

size_t MountTable::describe_unguarded_fuse(char* out, size_t capacity) const {
  if (capacity == 0) return 0;
  size_t length = 0;
  out[0] = '\0';
  for (const Mount& mount : mounts_) {
    if (mount.append_only || !is_fuse_type(mount.entry.type)) continue;
    int n = std::snprintf(out + length, capacity - length, "%s%s at %s", length ? ", " : "",
                          mount.entry.type.c_str(), mount.entry.mount_point.c_str());
    if (n < 0 || static_cast<size_t>(n) >= capacity - length) {
      length = capacity - 1;
      out[length] = '\0';
      break;
    }
    length += static_cast<size_t>(n);
  }
  return length;
}

const MountEntry* MountTable::mount_entry_of(std::string_view path) const {
  const Mount* mount = mount_of(path);
  return mount ? &mount->entry : nullptr;
}

const MountTable::Mount* MountTable::mount_of(std::string_view path) const {
  const Mount* best = nullptr;
  for (const Mount& mount : mounts_) {
    // ">=": of two mounts on one point the later one is on top.
    if (is_path_prefix(mount.entry.mount_point, path) &&
        (!best || mount.entry.mount_point.size() >= best->entry.mount_point.size())) {
      best = &mount;
    }
  }
  return best;
}

}  // namespace appendguard
