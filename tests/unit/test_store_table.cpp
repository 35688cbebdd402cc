// The table of stores (core/stores.def) and the one function from an operation and a row to a remedy
// (core/store_remedy.h): every row and every operation, generated from the table, none listed by hand.
#include <errno.h>
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/mount_table.h"
#include "core/rename_plan.h"
#include "core/store_remedy.h"
#include "core/store_table.h"

using namespace appendguard;

namespace {

std::vector<std::string> items(const char* list) {
  std::vector<std::string> out;
  std::string_view rest(list);
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    out.emplace_back(rest.substr(0, bar));
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return out;
}

RcloneCacheMode mode_named(const std::string& name) {
  return name == "unknown" ? RcloneCacheMode::kUnknown : parse_rclone_cache_mode(name);
}

// The remedies an operation may come to: what each one can do about it.
std::set<Remedy> possible_remedies(StoreOperation operation) {
  switch (operation) {
    case StoreOperation::kWriteBelowEnd:
    case StoreOperation::kShrink:
    case StoreOperation::kEmpty:
      return {Remedy::kPassOn, Remedy::kRefuse};
    case StoreOperation::kAppendExisting:
      return {Remedy::kPassOn, Remedy::kRewrite, Remedy::kRefuse};
    case StoreOperation::kReopenOwnFile:
      return {Remedy::kPassOn, Remedy::kAppendReopen, Remedy::kHeldSession};
    case StoreOperation::kReopenOtherFile:
      return {Remedy::kPassOn, Remedy::kAppendReopen, Remedy::kRewrite, Remedy::kRefuse};
    case StoreOperation::kGrow:
      return {Remedy::kPassOn, Remedy::kDeferredSize};
    case StoreOperation::kCreateToRename:
      return {Remedy::kPassOn, Remedy::kSpool};
    case StoreOperation::kRenameNew:
      return {Remedy::kPassOn, Remedy::kCopyOnRename};
    case StoreOperation::kRenameOnto:
      return {Remedy::kPassOn, Remedy::kCopyOnRename, Remedy::kRemoveTargetFirst};
  }
  return {};
}

// The fact of a row an operation is about, when it is one Accepts column.
const Accepts* fact_of(const StoreRow& row, StoreOperation operation) {
  switch (operation) {
    case StoreOperation::kWriteBelowEnd:
      return &row.below_end;
    case StoreOperation::kAppendExisting:
      return &row.append;
    case StoreOperation::kShrink:
      return &row.shrink;
    case StoreOperation::kEmpty:
      return &row.empty;
    case StoreOperation::kGrow:
      return &row.grow;
    default:
      return nullptr;
  }
}

}  // namespace

TEST_CASE(
    "every row and operation: a remedy the operation can have, pass on exactly where the store does it") {
  const size_t rows = store_rows().size();
  const size_t operations = store_operations().size();
  const size_t index = GENERATE_COPY(range(size_t{0}, rows * operations));
  const StoreRow& row = store_rows()[index / operations];
  const StoreOperation operation = store_operations()[index % operations];
  INFO(row.name << " (" << open_class_name(row.opens) << "): " << store_operation_name(operation));
  const Remedy remedy = remedy_for(operation, row);
  INFO("remedy: " << remedy_name(remedy));
  CHECK(possible_remedies(operation).count(remedy) == 1);
  if (const Accepts* fact = fact_of(row, operation)) {
    // What the store does is passed on; what it refuses or ignores is never passed on.
    if (*fact == Accepts::kYes) CHECK(remedy == Remedy::kPassOn);
    if (*fact == Accepts::kNo || *fact == Accepts::kIgnored) {
      if (operation != StoreOperation::kAppendExisting) CHECK(remedy != Remedy::kPassOn);
    }
  }
  switch (operation) {
    case StoreOperation::kAppendExisting:
      // No append: written anew where the store takes a new upload from 0, else refused.
      if (row.append != Accepts::kYes)
        CHECK(remedy == (row.overwrite == Accepts::kYes ? Remedy::kRewrite : Remedy::kRefuse));
      break;
    case StoreOperation::kReopenOwnFile:
    case StoreOperation::kReopenOtherFile:
      // Kept as asked only where writes land anywhere; an append reopen only where appends work.
      CHECK((remedy == Remedy::kPassOn) ==
            (row.write_open == WriteOpen::kKeeps && row.below_end == Accepts::kYes));
      if (remedy == Remedy::kAppendReopen) CHECK(row.append == Accepts::kYes);
      if (remedy == Remedy::kRewrite) CHECK(row.overwrite == Accepts::kYes);
      break;
    case StoreOperation::kCreateToRename:
    case StoreOperation::kRenameNew:
      CHECK((remedy == Remedy::kPassOn) == (row.rename != Rename::kNone));
      break;
    case StoreOperation::kRenameOnto:
      CHECK((remedy == Remedy::kRemoveTargetFirst) == (row.rename == Rename::kNewNameOnly));
      CHECK((remedy == Remedy::kCopyOnRename) == (row.rename == Rename::kNone));
      break;
    default:
      break;
  }
}

TEST_CASE("every remedy is the answer for some row and operation") {
  std::set<Remedy> seen;
  for (const StoreRow& row : store_rows()) {
    for (StoreOperation operation : store_operations()) seen.insert(remedy_for(operation, row));
  }
  for (Remedy remedy :
       {Remedy::kPassOn, Remedy::kAppendReopen, Remedy::kHeldSession, Remedy::kRewrite, Remedy::kDeferredSize,
        Remedy::kSpool, Remedy::kCopyOnRename, Remedy::kRemoveTargetFirst, Remedy::kRefuse}) {
    INFO(remedy_name(remedy));
    CHECK(seen.count(remedy) == 1);
  }
}

TEST_CASE("every row is recognised by its own mount, or found by its name") {
  const size_t index = GENERATE(range(size_t{0}, store_rows().size()));
  const StoreRow& row = store_rows()[index];
  INFO(row.name << " (" << open_class_name(row.opens) << ")");
  if (row.opens != OpenClass::kCachedOpens) {
    REQUIRE(find_store_by_name(row.name) == &row);
    CHECK(std::string(store_names_text()).find(row.name) != std::string::npos);
  } else {
    CHECK(find_store_by_name(row.name) != &row);  // the name gives the mount's own row
  }
  const std::vector<std::string> types = items(row.types);
  const std::vector<std::string> sources = items(row.sources);
  std::vector<std::string> modes = items(row.rclone);
  if (modes.empty()) modes.push_back("unknown");
  const StoreRow& own = row.opens == OpenClass::kCachedOpens ? *find_store_by_name(row.name) : row;
  if (row.opens == OpenClass::kCachedOpens) CHECK(cached_opens_row(own) == &row);
  for (const std::string& mode : modes) {
    for (const std::string& type : types) {
      for (const std::string& source : sources.empty() ? std::vector<std::string>{"some-source"} : sources) {
        INFO("type " << type << ", source " << source << ", rclone " << mode);
        CHECK(&recognise_store(type, source, mode_named(mode)) == &own);
      }
    }
    for (const std::string& source : sources) {
      INFO("type fuse, source " << source);
      CHECK(&recognise_store("fuse", source, mode_named(mode)) == &own);
    }
  }
  if (!recognised_by_mount(row)) CHECK(row.opens == OpenClass::kAllOpens);
}

TEST_CASE("a store's row says what the mount table keeps of it") {
  const size_t index = GENERATE(range(size_t{0}, store_rows().size()));
  const StoreRow& row = store_rows()[index];
  if (row.opens == OpenClass::kCachedOpens) return;  // the mount's facts come from its own row
  INFO(row.name);
  MountEntry entry;
  set_store_facts(entry, row);
  CHECK(entry.store == row.id);
  CHECK((entry.kind == StoreKind::kWriteOnce) ==
        (remedy_for(StoreOperation::kReopenOwnFile, row) == Remedy::kHeldSession));
  CHECK(entry.renames == (remedy_for(StoreOperation::kRenameNew, row) == Remedy::kPassOn));
  CHECK(entry.removes_target == (remedy_for(StoreOperation::kRenameOnto, row) == Remedy::kRemoveTargetFirst));
  const StoreRow* cached = cached_opens_row(row);
  CHECK(entry.caches_read_write ==
        (cached != nullptr && remedy_for(StoreOperation::kReopenOtherFile, *cached) == Remedy::kPassOn));
}

TEST_CASE("APPENDGUARD_FS MOUNT_POINT=STORE names a store for a mount that cannot be recognised") {
  MountSelection s;
  REQUIRE(parse_mount_selection("/mnt/vol/=databricks-volumes,fuse.x", s).empty());
  REQUIRE(s.named.size() == 1);
  CHECK(s.named[0].mount_point == "/mnt/vol");
  CHECK(s.named[0].store == StoreId::kDatabricksVolumes);
  CHECK(s.extra == std::vector<std::string>{"fuse.x"});
  CHECK(parse_mount_selection("/mnt/vol=no-such-store", s).find("'no-such-store' is not a store name") == 0);
  CHECK(parse_mount_selection("vol=databricks-volumes", s).find("absolute mount point") != std::string::npos);
  REQUIRE(parse_mount_selection("/mnt/vol=databricks-volumes", s).empty());
  CHECK(s.known);

  MountTable table;
  table.load(
      "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
      "50 22 0:50 / /mnt/vol rw - fuse dbfs rw\n"
      "51 22 0:51 / /mnt/other rw - fuse dbfs rw\n",
      s);
  CHECK(table.append_only_mount_of("/mnt/vol/x.bin") != nullptr);
  CHECK(table.append_only_mount_of("/mnt/other/x.bin") == nullptr);
  const MountFacts facts = table.facts_of("/mnt/vol/x.bin");
  CHECK(facts.kind == StoreKind::kWriteOnce);
  CHECK_FALSE(facts.renames);
  CHECK(table.facts_of("/mnt/other/x.bin").kind == StoreKind::kAppends);
}

TEST_CASE("a rename onto an existing file on HDFS stores removes the target first") {
  MountSelection s;
  REQUIRE(parse_mount_selection("known", s).empty());
  MountTable table;
  table.load(
      "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
      "40 22 0:35 / /mnt/aofs rw - fuse.appendonlyfs appendonlyfs:hdfs rw\n"
      "43 22 0:37 / /export/hdfs rw - fuse fuse_dfs rw\n"
      "44 22 0:38 / /mnt/strict rw - fuse.appendonlyfs appendonlyfs:strict rw\n",
      s);
  CHECK(table.facts_of("/mnt/aofs/model.safetensors").removes_target);
  CHECK(table.facts_of("/export/hdfs/a").removes_target);
  CHECK_FALSE(table.facts_of("/mnt/strict/a").removes_target);
  CHECK_FALSE(table.facts_of("/tmp/a").removes_target);
  CHECK(table.facts_of("/mnt/aofs/a").renames);
}

// The lists the library decided from before the table (kept here only to show the table decides the
// same for every mount a store makes): a store's own type with its own or a foreign source, or a plain
// FUSE type with a store's source, in every rclone mode.
namespace legacy {

const std::set<std::string> kKnownTypes = {"fuse.appendonlyfs",  "fuse.fuse_dfs", "fuse.hadoop-fuse-dfs",
                                           "fuse.mountpoint-s3", "fuse.rclone",   "fuse.gcsfuse"};
const std::set<std::string> kKnownSources = {"fuse_dfs", "hadoop-fuse-dfs", "mountpoint-s3", "gcsfuse"};
const std::set<std::string> kWriteOnceTypes = {"fuse.rclone", "fuse.mountpoint-s3", "fuse.gcsfuse"};
const std::set<std::string> kWriteOnceSources = {"mountpoint-s3", "gcsfuse", "appendonlyfs:s3",
                                                 "appendonlyfs:volumes"};
const std::set<std::string> kNoRenameSources = {"mountpoint-s3", "appendonlyfs:s3", "appendonlyfs:volumes"};

bool cached(const MountEntry& e) {
  return e.type == "fuse.rclone" &&
         (e.rclone_mode == RcloneCacheMode::kWrites || e.rclone_mode == RcloneCacheMode::kFull);
}
bool write_once(const MountEntry& e) {
  if (cached(e)) return false;
  return kWriteOnceTypes.count(e.type) || (is_fuse_type(e.type) && kWriteOnceSources.count(e.source));
}
bool renames(const MountEntry& e) {
  if (e.type == "fuse.mountpoint-s3") return false;
  return !(is_fuse_type(e.type) && kNoRenameSources.count(e.source));
}
bool known(const MountEntry& e) {
  return !cached(e) && (kKnownTypes.count(e.type) || (is_fuse_type(e.type) && kKnownSources.count(e.source)));
}

}  // namespace legacy

TEST_CASE("the table decides as the lists before it did, for every mount a store makes") {
  const std::vector<std::string> types = {"fuse.appendonlyfs",
                                          "fuse.fuse_dfs",
                                          "fuse.hadoop-fuse-dfs",
                                          "fuse.mountpoint-s3",
                                          "fuse.rclone",
                                          "fuse.gcsfuse",
                                          "fuse",
                                          "fuseblk",
                                          "fuse.sshfs",
                                          "ext4",
                                          "tmpfs",
                                          "nfs4"};
  const std::vector<std::string> sources = {"appendonlyfs:hdfs",    "appendonlyfs:strict", "appendonlyfs:s3",
                                            "appendonlyfs:volumes", "appendonlyfs:other",  "fuse_dfs",
                                            "hadoop-fuse-dfs",      "mountpoint-s3",       "gcsfuse",
                                            "local:/srv",           "/dev/sda1",           "host:/x"};
  const std::vector<RcloneCacheMode> modes = {RcloneCacheMode::kUnknown, RcloneCacheMode::kOff,
                                              RcloneCacheMode::kMinimal, RcloneCacheMode::kWrites,
                                              RcloneCacheMode::kFull};
  MountSelection known_stores;
  REQUIRE(parse_mount_selection("known", known_stores).empty());
  auto store_source = [&](const std::string& source) {
    return source.starts_with("appendonlyfs:") || legacy::kKnownSources.count(source);
  };
  size_t compared = 0;
  for (const std::string& type : types) {
    for (const std::string& source : sources) {
      // One store per mount: a store's type with another store's source does not occur; appendonlyfs
      // mounts only as fuse.appendonlyfs.
      const bool store_type = legacy::kKnownTypes.count(type) != 0;
      if (store_type && store_source(source)) {
        const bool own =
            (type == "fuse.appendonlyfs" && source.starts_with("appendonlyfs:")) || type == "fuse." + source;
        if (!own) continue;
      }
      if (!store_type && source.starts_with("appendonlyfs:")) continue;
      for (RcloneCacheMode mode : modes) {
        if (type != "fuse.rclone" && mode != RcloneCacheMode::kUnknown) continue;
        MountEntry e;
        e.type = type;
        e.source = source;
        e.rclone_mode = mode;
        INFO("type " << type << ", source " << source << ", rclone " << rclone_cache_mode_name(mode));
        CHECK((classify_store(e) == StoreKind::kWriteOnce) == legacy::write_once(e));
        CHECK(store_renames(e) == legacy::renames(e));
        CHECK(is_append_only_mount(e, known_stores) == legacy::known(e));
        MountEntry loaded = e;
        set_store_facts(loaded, store_row_of(e));
        CHECK(loaded.caches_read_write == (type == "fuse.rclone" && mode == RcloneCacheMode::kMinimal));
        ++compared;
      }
    }
  }
  CHECK(compared > 60);
}

TEST_CASE("a refused rename onto an existing file is retried without the target only where the row says so") {
  const bool flags_zero[] = {true, false};
  for (bool store : {true, false}) {
    for (int error : {EIO, EEXIST, ENOSYS, EPERM, ENOENT, EXDEV}) {
      for (bool plain : flags_zero) {
        for (bool source_file : {true, false}) {
          for (bool target_file : {true, false}) {
            const unsigned flags = plain ? 0u : 1u;  // RENAME_NOREPLACE
            INFO("store " << store << " error " << error << " flags " << flags << " files " << source_file
                          << target_file);
            CHECK(removes_target_and_retries(error, flags, store, source_file, target_file) ==
                  (store && plain && (error == EIO || error == EEXIST) && source_file && target_file));
          }
        }
      }
    }
  }
}
