// The table of stores (core/stores.def): how each store is recognised and what it accepts, one row per
// store and open class. Pure data and lookups; what the library does with a row is core/store_remedy.h.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "core/rclone_cmdline.h"

namespace appendguard {

// Whether a store accepts an operation.
enum class Accepts {
  kYes,
  kNo,       // refused with an error
  kIgnored,  // answered 0 and not carried out
  kUnknown,  // neither documented nor measured
};

// What a write open of an existing file without O_TRUNC means on the store.
enum class WriteOpen {
  kKeeps,    // the bytes stay; writes land where they are asked to (within the store's other rules)
  kAppends,  // its writes go to the end of the file
  kEmpties,  // the file is replaced by a new one from offset 0
  kRefused,  // the open or its writes fail
};

enum class Rename {
  kReplaces,     // to a new name and onto an existing file (atomic or not)
  kNewNameOnly,  // onto an existing file refused (HDFS's FileSystem#rename)
  kNone,         // refused (ENOSYS)
  kUnknown,
};

// When other readers see the bytes written.
enum class Visible { kWrite, kClose, kFsyncOrClose };

// Which opens of a mount a row describes (rclone --vfs-cache-mode minimal serves the two differently).
enum class OpenClass {
  kAllOpens,
  kCachedOpens,    // O_RDWR or O_APPEND opens, served from a local cache
  kStreamedOpens,  // the other write opens, streamed as one upload
};

enum class StoreId : unsigned char {
#define STORE(id, ...) id,
#include "core/stores.def"
#undef STORE
};

struct StoreRow {
  StoreId id;
  const char* name;     // the store's name in APPENDGUARD_FS (MOUNT_POINT=NAME); rows of one store share it
  const char* types;    // mount types, '|'-separated
  const char* sources;  // FUSE sources, '|'-separated
  const char* rclone;   // rclone cache modes, '|'-separated ("" any)
  OpenClass opens;
  Accepts below_end;
  Accepts append;
  WriteOpen write_open;
  Accepts overwrite;
  Accepts shrink;
  Accepts empty;
  Accepts grow;
  Rename rename;
  Accepts reads_while_written;
  Visible visible_at;
  Accepts keeps_old;
  const char* measured;
  const char* read;
};

// Every row, in table order.
std::span<const StoreRow> store_rows();
const StoreRow& store_row(StoreId id);
// The row of any mount no other row recognises (local disks, unknown FUSE stores).
const StoreRow& other_store_row();

// The mount's own row of the store APPENDGUARD_FS names `name` ("databricks-volumes"), or null.
const StoreRow* find_store_by_name(std::string_view name);
// The store names, comma-separated, for an error line ("appendonlyfs-hdfs, ..., other").
std::string store_names_text();

// The row recognising a mount by its type, FUSE source and rclone cache mode (the mount's own row, of
// kAllOpens or kStreamedOpens): a source names a store more surely than a type (appendonlyfs puts its
// profile in its source), so a row matching both comes first, then one matching the source (of a FUSE
// mount), then one matching the type (and the rclone mode). The other row when none does.
const StoreRow& recognise_store(std::string_view type, std::string_view source, RcloneCacheMode rclone_mode);
// The row of the same store serving cached opens (kCachedOpens), or null when its opens do not differ.
const StoreRow* cached_opens_row(const StoreRow& row);
// Whether the row recognises a store by its mount (types or sources) rather than only by its name.
bool recognised_by_mount(const StoreRow& row);

// Names for the generated documentation and the doctor: "yes", "no", "ignored", "?"; "keeps", ...
const char* accepts_name(Accepts a);
const char* write_open_name(WriteOpen w);
const char* rename_name(Rename r);
const char* visible_name(Visible v);
const char* open_class_name(OpenClass c);

}  // namespace appendguard
