// The store profiles as data: one entry per emulated store. A new store is one entry here (and its name
// in the Profile enum); profile_rules.cpp applies the entries, options.cpp takes the names and help text.
#include <fcntl.h>

#include <cerrno>

#include "profile_rules.hpp"

namespace appendonlyfs {
namespace {

using enum When;

// Apache fuse_dfs (fuse_impls_open.c) as DESIGN.md section 1 describes it: O_RDWR becomes O_RDONLY if
// the file exists, else O_WRONLY; an O_WRONLY open without O_APPEND is a libhdfs create with
// overwrite=true.
constexpr OpenCase kHdfsOpen[] = {
    {.exists = no, .kind = HandleKind::write},
    {.rdwr = yes, .kind = HandleKind::read, .reason = "O_RDWR on an existing file is a read stream"},
    {.append = yes, .kind = HandleKind::write, .truncate = any},
    {.kind = HandleKind::write, .truncate = yes, .reason = "O_WRONLY without O_APPEND replaces the file"},
};

// get_hdfs_open_flags() in Hadoop's fuse_impls_open.c: O_TRUNC or an empty file is a write stream that
// replaces, O_RDWR on a non-empty file a read stream, O_WRONLY on a non-empty file appends.
constexpr OpenCase kHdfsTranslatedOpen[] = {
    {.exists = no, .kind = HandleKind::write},
    {.trunc = yes, .kind = HandleKind::write, .truncate = yes},
    {.empty = yes, .kind = HandleKind::write, .truncate = yes},
    {.rdwr = yes, .kind = HandleKind::read, .reason = "O_RDWR on a non-empty file is a read stream"},
    {.kind = HandleKind::write, .reason = "O_WRONLY on a non-empty file appends"},
};

// mountpoint-s3 with --allow-overwrite: an existing file can only be written after O_TRUNC.
constexpr OpenCase kS3Open[] = {
    {.exists = no, .kind = HandleKind::write},
    {.trunc = yes, .kind = HandleKind::write, .truncate = yes},
    {.rdwr = yes, .kind = HandleKind::read, .reason = "O_RDWR on an existing file is a read handle"},
    {.error = EPERM, .kind = HandleKind::read, .reason = "existing file opened for writing without O_TRUNC"},
};

// Databricks volumes: a new file, or an existing one after O_TRUNC ("wb"), is a write handle; an
// existing file opened for writing without O_TRUNC (append, "r+b") opens, and its writes fail EOPNOTSUPP.
constexpr OpenCase kVolumesOpen[] = {
    {.exists = no, .kind = HandleKind::write},
    {.trunc = yes, .kind = HandleKind::write, .truncate = yes},
    {.kind = HandleKind::read,
     .reason = "existing file opened for writing without O_TRUNC: no appends, no rewrites"},
};

constexpr OpenCase kStrictOpen[] = {
    {.exists = yes,
     .trunc = yes,
     .empty = no,
     .error = EOPNOTSUPP,
     .kind = HandleKind::read,
     .reason = "O_TRUNC would shrink a non-empty file"},
    {.kind = HandleKind::write},
};

constexpr ProfileSpec kProfiles[] = {
    {
        .profile = Profile::hdfs,
        .name = "hdfs",
        .help = "Apache fuse_dfs (O_RDWR existing = read stream, writes ENOTSUP;\n"
                "O_WRONLY replaces; only appends at end of file)",
        .open = kHdfsOpen,
        .translated_open = kHdfsTranslatedOpen,
        .write = {.read_handle_error = EOPNOTSUPP,
                  .anchor = WriteAnchor::file_end,
                  .misplaced_error = EOPNOTSUPP,
                  .misplaced_reason = "not-at-end",
                  .misplaced_poisons = false,
                  .poisoned_error = 0},
        // Vendor builds refuse a truncate to a non-zero size; Apache trunk silently ignores it.
        .truncate = {.allows = TruncateAllows::to_zero,
                     .allowed_reason = "recreate",
                     .error = EOPNOTSUPP,
                     .reason_nonempty_file = "non-zero",
                     .reason_empty_file = "non-zero",
                     .ignorable = true,
                     .ignored_while_written = false},
        // dfs_rename calls libhdfs hdfsRename, i.e. FileSystem#rename, which returns false when the
        // destination file exists; hdfsRename turns false into EIO.
        .rename = {.error = 0, .onto_file_error = EIO, .onto_file_reason = "destination-exists"},
        .fallocate_error = EOPNOTSUPP,
        .handles = {.busy_error = 0,
                    .sealed_error = 0,
                    .write_handle_read_error = 0,
                    .link_error = 0,
                    .sync_open_error = 0,
                    .unlink_written_error = 0},
    },
    {
        .profile = Profile::s3,
        .name = "s3",
        .help = "mountpoint-s3 (O_WRONLY existing needs O_TRUNC else EPERM;\n"
                "out-of-order write EINVAL and poisons the handle; rename ENOSYS;\n"
                "one writer or many readers, else EPERM; fsync ends the upload)",
        .open = kS3Open,
        .translated_open = {},
        .write = {.read_handle_error = EBADF,
                  .anchor = WriteAnchor::handle_end,
                  .misplaced_error = EINVAL,
                  .misplaced_reason = "out-of-order",
                  .misplaced_poisons = true,
                  .poisoned_error = EINVAL},
        .truncate = {.allows = TruncateAllows::empty_stays_empty,
                     .allowed_reason = {},
                     .error = EPERM,
                     .reason_nonempty_file = "committed-file",
                     .reason_empty_file = "extend",
                     .ignorable = false,
                     // mountpoint-s3's setattr (fs.rs, superblock.rs) refuses a committed file EPERM and
                     // accepts a file being written without applying the size.
                     .ignored_while_written = true},
        .rename = {.error = ENOSYS, .onto_file_error = ENOSYS, .onto_file_reason = {}},  // no rename at all
        // mountpoint-s3 has no fallocate operation (fuse.rs: ENOSYS, which the kernel turns into EOPNOTSUPP).
        .fallocate_error = EOPNOTSUPP,
        // Checked against awslabs/mountpoint-s3 (doc/SEMANTICS.md and mountpoint-s3-fs/src/fs.rs,
        // fs/handles.rs, fuse.rs at 58817ca, 2026-08-22):
        // - "A file can not have a reader and a writer file handle open at the same time, and attempting
        //   to do so will result in an EPERM error for the second open request"; one writer at a time.
        // - fsync/fdatasync "complete the upload of the object to S3 and disallow further writes", and a
        //   flush by the opening process after bytes were written completes it too; later writes fail
        //   EIO ("upload already completed", UploadState::write).
        // - "you cannot both read and write to the same file descriptor": fs.rs read() answers EBADF
        //   "file handle is not open for reads" on a write handle.
        // - "Mountpoint does not support hard or symbolic links": fuse.rs answers link and symlink EPERM.
        // - fs.rs open: "O_SYNC and O_DSYNC are not supported", EINVAL for every open.
        // - superblock.rs unlink: "unlink on local file not allowed until write is complete", EPERM.
        // - An O_TRUNC open of an existing object starts a multipart upload; S3 replaces the object only
        //   when it completes (flush by the opener, fsync, release). A failed write, an out-of-order one
        //   included, aborts it (fs/handles.rs UploadState::write: Failed, finish_on_error), and the old
        //   object stays.
        .handles = {.busy_error = EPERM,
                    .sealed_error = EIO,
                    .write_handle_read_error = EBADF,
                    .link_error = EPERM,
                    .sync_open_error = EINVAL,
                    .unlink_written_error = EPERM,
                    .replaces_at_completion = true},
    },
    {
        .profile = Profile::strict,
        .name = "strict",
        .help = "only appends; any other write or size change EOPNOTSUPP",
        .open = kStrictOpen,
        .translated_open = {},
        .write = {.read_handle_error = EBADF,
                  .anchor = WriteAnchor::file_end,
                  .misplaced_error = EOPNOTSUPP,
                  .misplaced_reason = "not-at-end",
                  .misplaced_poisons = false,
                  .poisoned_error = 0},
        .truncate = {.allows = TruncateAllows::same_size,
                     .allowed_reason = {},
                     .error = EOPNOTSUPP,
                     .reason_nonempty_file = "size-change",
                     .reason_empty_file = "size-change",
                     .ignorable = false,
                     .ignored_while_written = false},
        .rename = {.error = 0, .onto_file_error = 0, .onto_file_reason = {}},
        .fallocate_error = EOPNOTSUPP,
        .handles = {.busy_error = 0,
                    .sealed_error = 0,
                    .write_handle_read_error = 0,
                    .link_error = 0,
                    .sync_open_error = 0,
                    .unlink_written_error = 0},
    },
    {
        // Databricks Unity Catalog volumes (/Volumes/..., a FUSE mount over cloud object storage). What
        // each rule rests on (docs/stores.md says the same):
        // - appends fail "OSError: [Errno 95] Operation not supported" (issue 26; the error users quote);
        // - Databricks' documentation, "Limitations of working with files in volumes" (quoted in
        //   NVIDIA-NeMo/Automodel#995): "Direct-append or non-sequential (random) writes" are not
        //   supported: a write must continue where the handle's last write ended;
        // - NVIDIA-NeMo/Automodel#1023: "r+b isn't supported", "wb" is: an existing file is written only
        //   after O_TRUNC;
        // - rename, renameat, renameat2, link and linkat fail ENOSYS, "Function not implemented (os error
        //   38)" (earth-mover/icechunk#2341, delta-io/delta-rs#2540, developmentseed/obstore#748);
        //   symbolic links are not supported either (Automodel#995; errno not quoted: ENOSYS assumed);
        // - the files are objects in cloud object storage (S3, ADLS, GCS), which replace an object only by
        //   a completed upload, and the volume's FUSE client uploads a written file at its close: an
        //   existing file keeps its contents until then (assumed: a failed write aborts the upload, as on
        //   mountpoint-s3).
        // Not found in any source, and chosen to fail like the rest (EOPNOTSUPP): a truncate to a size
        // other than 0 (safetensors 0.8's preallocation), fallocate. Where the refusal comes (at the
        // write, not the open) is also an assumption, matching the traceback users show for appends.
        .profile = Profile::volumes,
        .name = "volumes",
        .help = "Databricks Unity Catalog volumes (existing file: writes EOPNOTSUPP\n"
                "unless opened O_TRUNC; non-sequential write EOPNOTSUPP; rename ENOSYS)",
        .open = kVolumesOpen,
        .translated_open = {},
        .write = {.read_handle_error = EOPNOTSUPP,
                  .anchor = WriteAnchor::handle_end,
                  .misplaced_error = EOPNOTSUPP,
                  .misplaced_reason = "non-sequential",
                  .misplaced_poisons = false,
                  .poisoned_error = 0},
        .truncate = {.allows = TruncateAllows::to_zero,
                     .allowed_reason = {},
                     .error = EOPNOTSUPP,
                     .reason_nonempty_file = "non-zero",
                     .reason_empty_file = "non-zero",
                     .ignorable = false,
                     .ignored_while_written = false},
        .rename = {.error = ENOSYS, .onto_file_error = ENOSYS, .onto_file_reason = {}},
        .fallocate_error = EOPNOTSUPP,
        .handles = {.busy_error = 0,
                    .sealed_error = 0,
                    .write_handle_read_error = 0,
                    .link_error = ENOSYS,
                    .sync_open_error = 0,
                    .unlink_written_error = 0,
                    .replaces_at_completion = true},
    },
};

}  // namespace

std::span<const ProfileSpec> profiles() {
  return kProfiles;
}

}  // namespace appendonlyfs
