#include "core/store_table.h"

#include "core/mount_table.h"

namespace appendguard {
namespace {

constexpr StoreRow kRows[] = {
#define STORE(id_, name_, types_, sources_, rclone_, opens_, below_end_, append_, write_open_, overwrite_, \
              shrink_, empty_, grow_, rename_, reads_, visible_, keeps_old_, measured_, read_)             \
  {.id = StoreId::id_,                                                                                     \
   .name = (name_),                                                                                        \
   .types = (types_),                                                                                      \
   .sources = (sources_),                                                                                  \
   .rclone = (rclone_),                                                                                    \
   .opens = OpenClass::opens_,                                                                             \
   .below_end = Accepts::below_end_,                                                                       \
   .append = Accepts::append_,                                                                             \
   .write_open = WriteOpen::write_open_,                                                                   \
   .overwrite = Accepts::overwrite_,                                                                       \
   .shrink = Accepts::shrink_,                                                                             \
   .empty = Accepts::empty_,                                                                               \
   .grow = Accepts::grow_,                                                                                 \
   .rename = Rename::rename_,                                                                              \
   .reads_while_written = Accepts::reads_,                                                                 \
   .visible_at = Visible::visible_,                                                                        \
   .keeps_old = Accepts::keeps_old_,                                                                       \
   .measured = (measured_),                                                                                \
   .read = (read_)},
#include "core/stores.def"
#undef STORE
};

constexpr size_t kRowCount = sizeof kRows / sizeof kRows[0];

// Each row's index is its id, and the table ends with the other row (the fallback).
constexpr bool ids_follow_rows() {
  for (size_t i = 0; i < kRowCount; ++i) {
    if (static_cast<size_t>(kRows[i].id) != i) return false;
  }
  return kRows[kRowCount - 1].id == StoreId::kOther;
}
static_assert(ids_follow_rows());

// Whether `word` is one of the '|'-separated items of `list`.
bool listed(const char* list, std::string_view word) {
  std::string_view rest(list);
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    if (rest.substr(0, bar) == word) return true;
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return false;
}

bool mode_fits(const StoreRow& row, RcloneCacheMode mode) {
  return row.rclone[0] == '\0' || listed(row.rclone, rclone_cache_mode_name(mode));
}

bool own_row(const StoreRow& row) {
  return row.opens != OpenClass::kCachedOpens;
}

}  // namespace

std::span<const StoreRow> store_rows() {
  return kRows;
}

const StoreRow& store_row(StoreId id) {
  return kRows[static_cast<size_t>(id)];
}

const StoreRow& other_store_row() {
  return store_row(StoreId::kOther);
}

const StoreRow* find_store_by_name(std::string_view name) {
  for (const StoreRow& row : kRows) {
    if (own_row(row) && name == row.name) return &row;
  }
  return nullptr;
}

std::string store_names_text() {
  std::string names;
  for (const StoreRow& row : kRows) {
    if (!own_row(row)) continue;
    if (!names.empty()) names += ", ";
    names += row.name;
  }
  return names;
}

bool recognised_by_mount(const StoreRow& row) {
  return row.types[0] != '\0' || row.sources[0] != '\0';
}

const StoreRow& recognise_store(std::string_view type, std::string_view source, RcloneCacheMode rclone_mode) {
  const bool fuse = is_fuse_type(type);
  for (const StoreRow& row : kRows) {
    if (own_row(row) && listed(row.types, type) && listed(row.sources, source) && mode_fits(row, rclone_mode))
      return row;
  }
  if (fuse) {
    for (const StoreRow& row : kRows) {
      if (own_row(row) && listed(row.sources, source)) return row;
    }
  }
  for (const StoreRow& row : kRows) {
    if (own_row(row) && row.sources[0] == '\0' && listed(row.types, type) && mode_fits(row, rclone_mode))
      return row;
  }
  for (const StoreRow& row : kRows) {
    if (own_row(row) && listed(row.types, type) && mode_fits(row, rclone_mode)) return row;
  }
  return other_store_row();
}

const StoreRow* cached_opens_row(const StoreRow& row) {
  for (const StoreRow& other : kRows) {
    if (other.opens == OpenClass::kCachedOpens && std::string_view(other.name) == row.name) return &other;
  }
  return nullptr;
}

const char* accepts_name(Accepts a) {
  switch (a) {
    case Accepts::kYes:
      return "yes";
    case Accepts::kNo:
      return "no";
    case Accepts::kIgnored:
      return "ignored";
    case Accepts::kUnknown:
      break;
  }
  return "?";
}

const char* write_open_name(WriteOpen w) {
  switch (w) {
    case WriteOpen::kKeeps:
      return "keeps";
    case WriteOpen::kAppends:
      return "appends";
    case WriteOpen::kEmpties:
      return "empties";
    case WriteOpen::kRefused:
      break;
  }
  return "refused";
}

const char* rename_name(Rename r) {
  switch (r) {
    case Rename::kReplaces:
      return "replaces";
    case Rename::kNewNameOnly:
      return "new name only";
    case Rename::kNone:
      return "none";
    case Rename::kUnknown:
      break;
  }
  return "?";
}

const char* visible_name(Visible v) {
  switch (v) {
    case Visible::kWrite:
      return "write";
    case Visible::kClose:
      return "close";
    case Visible::kFsyncOrClose:
      break;
  }
  return "fsync or close";
}

const char* open_class_name(OpenClass c) {
  switch (c) {
    case OpenClass::kAllOpens:
      return "all opens";
    case OpenClass::kCachedOpens:
      return "O_RDWR or O_APPEND opens";
    case OpenClass::kStreamedOpens:
      break;
  }
  return "other write opens";
}

}  // namespace appendguard
