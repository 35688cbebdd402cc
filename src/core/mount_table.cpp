#include "core/mount_table.h"

#include <string.h>  // memmem
#include <sys/sysmacros.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "core/store_remedy.h"

namespace appendguard {
namespace {

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

const StoreRow& store_row_of(const MountEntry& entry) {
  return recognise_store(entry.type, entry.source, entry.rclone_mode);
}

StoreKind classify_store(const MountEntry& entry) {
  return holds_sessions(store_row_of(entry)) ? StoreKind::kWriteOnce : StoreKind::kAppends;
}

bool store_renames(const MountEntry& entry) {
  return renames_files(store_row_of(entry));
}

void set_store_facts(MountEntry& entry, const StoreRow& row) {
  entry.store = row.id;
  entry.kind = holds_sessions(row) ? StoreKind::kWriteOnce : StoreKind::kAppends;
  entry.renames = renames_files(row);
  entry.removes_target = removes_target_before_rename(row);
  const StoreRow* cached = cached_opens_row(row);
  entry.caches_read_write =
      cached && remedy_for(StoreOperation::kReopenOtherFile, *cached) == Remedy::kPassOn;
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
    } else if (size_t equals = word.find('='); equals != std::string_view::npos) {
      std::string point(word.substr(0, equals));
      const std::string_view name = word.substr(equals + 1);
      if (point.empty() || point[0] != '/')
        return "'" + std::string(word) + "': MOUNT_POINT=STORE needs an absolute mount point";
      const StoreRow* row = find_store_by_name(name);
      if (!row) return "'" + std::string(name) + "' is not a store name (stores: " + store_names_text() + ")";
      while (point.size() > 1 && point.back() == '/') point.pop_back();
      out.named.push_back({std::move(point), row->id});
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
  for (const MountSelection::NamedStore& named : selection.named) {
    if (named.mount_point == entry.mount_point) return true;
  }
  // A store recognised by its mount that refuses some write pattern (not rclone in cache mode writes or
  // full, which accepts them all).
  if (selection.known) {
    const StoreRow& row = store_row_of(entry);
    if (recognised_by_mount(row) && refuses_writes(row)) return true;
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
    const StoreRow* row = &store_row_of(mount.entry);
    for (const MountSelection::NamedStore& named : selection.named) {
      if (named.mount_point == mount.entry.mount_point) row = &store_row(named.store);
    }
    set_store_facts(mount.entry, *row);
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
    if (under(point, [](const Mount& m) {
          return m.entry.kind == StoreKind::kWriteOnce || !m.entry.renames || m.entry.removes_target;
        }))
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
    facts.caches_read_write = mount->entry.caches_read_write;
    facts.removes_target = mount->entry.removes_target;
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
