// The write rules of append-only stores, free of FUSE so they can be unit tested.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace appendonlyfs {

enum class Profile { hdfs, s3, strict, volumes };

// What hdfs does with truncate to a non-zero size: vendor builds refuse, Apache trunk silently ignores.
enum class NonZeroTruncate { refuse, ignore };

// How hdfs opens an existing file for writing. replace: as DESIGN.md section 1 describes fuse_dfs
// (O_WRONLY without O_APPEND replaces the file, O_RDWR is a read stream). translate: as
// get_hdfs_open_flags() in Hadoop's fuse_impls_open.c does it: O_TRUNC or an empty file is a write
// stream that replaces, O_RDWR on a non-empty file a read stream, O_WRONLY on a non-empty file appends.
enum class HdfsOpen { replace, translate };

// What a handle may do after open, as the emulated store sees it.
enum class HandleKind {
  read,   // writes are refused (O_RDONLY, or O_RDWR turned into a read stream)
  write,  // writes are accepted if they follow the append rule
};

// ---- A store profile as data (profiles.cpp holds one entry per store; the functions below apply it) ----

// A condition on one property of an open: any value, or must be true/false.
enum class When { any, yes, no };

// One case of a profile's open rules; the first case whose conditions hold decides. O_RDONLY opens are
// read handles in every profile and never reach the cases.
struct OpenCase {
  When exists = When::any;
  When rdwr = When::any;    // O_RDWR (else O_WRONLY)
  When trunc = When::any;   // O_TRUNC
  When append = When::any;  // O_APPEND
  When empty = When::any;   // the existing file has size 0
  int error = 0;            // non-zero: refuse the open with this errno
  HandleKind kind = HandleKind::write;
  When truncate = When::no;  // empty the file: yes, no, or any = as O_TRUNC asks
  std::string_view reason = {};
};

// Writes: where a handle's next write must start, and what a misplaced one gets.
enum class WriteAnchor {
  file_end,    // the current end of the file
  handle_end,  // where this handle's last write ended (the store streams one upload per handle)
};

struct WriteRules {
  int read_handle_error;  // a write through a read handle
  WriteAnchor anchor;
  int misplaced_error;  // a write not at the anchor
  std::string_view misplaced_reason;
  bool misplaced_poisons;  // after a misplaced write every later write on the handle fails poisoned_error
  int poisoned_error;
};

// Truncates (truncate, ftruncate, O_TRUNC through setattr): which size changes the store performs.
enum class TruncateAllows {
  to_zero,            // any file to size 0 (a recreate)
  empty_stays_empty,  // only an empty file to size 0
  same_size,          // only to the current size (no change)
};

struct TruncateRules {
  TruncateAllows allows;
  std::string_view allowed_reason;        // logged with an allowed truncate, when not empty
  int error;                              // any other truncate
  std::string_view reason_nonempty_file;  // the refusal's reason when the file has bytes
  std::string_view reason_empty_file;     // and when it is empty
  bool ignorable;                         // -o truncate=ignore turns the refusal into "return 0, do nothing"
  bool ignored_while_written;             // a truncate of a file being written returns 0 and does nothing
};

struct RenameRules {
  int error;            // every rename; 0: renames pass through
  int onto_file_error;  // a rename whose destination is an existing file; 0: passes
  std::string_view onto_file_reason;
};

// What a store allows besides the write rules: concurrent handles, the end of an upload, reads through
// a write handle, links. Every errno here is 0 where the store does not refuse.
struct HandleRules {
  // An open that would give a file a writer and another handle at once (a second writer, a reader of a
  // file being written, a writer of a file being read) fails with this errno.
  int busy_error;
  // After fsync/fdatasync on a write handle, or a flush of it by the process that opened it once bytes
  // were written, the upload is complete: every later write on the handle fails with this errno.
  int sealed_error;
  int write_handle_read_error;  // a read through a write handle
  int link_error;               // link(2) and symlink(2)
  int sync_open_error;          // any open with O_SYNC or O_DSYNC
  int unlink_written_error;     // an unlink of a file a write handle is writing (its upload not ended)
  // An existing file opened with O_TRUNC keeps its old contents, for every other open and stat by name,
  // until the write handle's upload completes (an object store replaces an object only by a completed
  // upload); an upload that failed (a refused or failed write) or never completed leaves the old file.
  bool replaces_at_completion = false;
};

struct ProfileSpec {
  Profile profile;
  std::string_view name;                      // the -o profile= value
  std::string_view help;                      // usage text, lines separated by '\n'
  std::span<const OpenCase> open;             // the open rules
  std::span<const OpenCase> translated_open;  // with -o hdfs_open=translate; empty: the option does not apply
  WriteRules write;
  TruncateRules truncate;
  RenameRules rename;
  int fallocate_error;
  HandleRules handles;
};

// Every profile, in the order the usage text lists them; the first is the default.
std::span<const ProfileSpec> profiles();
const ProfileSpec& profile_spec(Profile profile);

std::string_view profile_name(Profile profile);
std::optional<Profile> parse_profile(std::string_view name);
// "hdfs, s3, strict, volumes" (for error lines) or with another separator ("hdfs|s3|strict|volumes").
std::string profile_names(std::string_view separator = ", ");

// An open as the emulated store receives it (the library's own OpenRequest is in src/shim/guard.h).
struct StoreOpenRequest {
  int flags = 0;  // open(2) flags as the client passed them
  bool exists = false;
  std::uint64_t size = 0;  // current size, if it exists
};

struct StoreOpenDecision {
  int error = 0;  // non-zero: refuse the open with this errno
  HandleKind kind = HandleKind::read;
  bool truncate = false;  // empty the file as part of the open
  std::string_view reason = {};
};

StoreOpenDecision decide_open(Profile profile, const StoreOpenRequest& request,
                              HdfsOpen hdfs_open = HdfsOpen::replace);

// Per-handle state the rules need: s3 checks offsets against what the handle itself wrote and
// poisons a handle after an out-of-order write.
struct HandleState {
  HandleKind kind = HandleKind::read;
  std::uint64_t written_end = 0;
  bool poisoned = false;
  bool sealed = false;  // the upload was completed (fsync, or the opener's flush): see HandleRules
};

// A write as the emulated store receives it (the library's WriteRequest is in src/core/eof_rule.h).
struct StoreWriteRequest {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t file_end = 0;  // current size of the file in the store
};

struct StoreWriteDecision {
  int error = 0;
  bool poison_handle = false;
  std::uint64_t expected_offset = 0;  // the only offset that would have been accepted
  std::string_view reason;
};

StoreWriteDecision decide_write(Profile profile, const HandleState& handle, const StoreWriteRequest& request);

// Updates the handle after `written` bytes were stored at `offset`.
void record_write(HandleState& handle, std::uint64_t offset, std::uint64_t written);

enum class TruncateEffect { apply, skip };

struct TruncateDecision {
  int error = 0;
  TruncateEffect effect = TruncateEffect::apply;
  std::string_view reason;
};

// being_written: a write handle whose upload has not ended is open on the file.
TruncateDecision decide_truncate(Profile profile, NonZeroTruncate non_zero, std::uint64_t current_size,
                                 std::uint64_t new_size, bool being_written = false);

// fallocate is refused by every profile today; the errno is the profile's.
int fallocate_error(Profile profile);

struct RenameDecision {
  int error = 0;  // 0: pass the rename through
  std::string_view reason;
};

// onto_existing_file: the destination exists and is not a directory. fuse_dfs's dfs_rename calls libhdfs
// hdfsRename, i.e. FileSystem#rename, which returns false when the destination file exists; hdfsRename
// turns false into EIO. mountpoint-s3 has no rename at all.
RenameDecision decide_rename(Profile profile, bool onto_existing_file);

// The handles open on one file, as far as the busy rule counts them (a handle stops counting at its
// release, or when its upload or read ended at a flush).
struct OpenHandles {
  unsigned readers = 0;
  unsigned writers = 0;
};

// The errno an open of a `kind` handle gets from the busy rule, 0 if it may open.
int busy_error(Profile profile, HandleKind kind, const OpenHandles& open);

// Whether a flush ends a write handle's upload (sealing it): after bytes were written, by the process
// that opened it (mountpoint-s3 defers the upload when another process closes a duplicate, or when the
// file is still empty).
bool flush_seals(Profile profile, std::uint64_t bytes_written, bool by_opening_process);

}  // namespace appendonlyfs
