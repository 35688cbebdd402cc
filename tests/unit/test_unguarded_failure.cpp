#include <catch2/catch.hpp>

#include <fcntl.h>

#include <cerrno>
#include <string>

#include "core/mount_table.h"
#include "core/unguarded_failure.h"

using namespace appendguard;

TEST_CASE("the refusals of stores, and FUSE mount types") {
  for (int e : {EOPNOTSUPP, ENOSYS, EPERM, ESPIPE, EINVAL, EBADF}) CHECK(is_store_refusal(e));
  for (int e : {0, ENOENT, EACCES, EIO, ENOSPC, EINTR, EAGAIN}) CHECK_FALSE(is_store_refusal(e));
  for (const char* t : {"fuse", "fuseblk", "fuse.rclone", "fuse.appendonlyfs", "fuseblk.ntfs"})
    CHECK(is_fuse_type(t));
  for (const char* t : {"", "ext4", "tmpfs", "fusectl", "nfs"}) CHECK_FALSE(is_fuse_type(t));
}

TEST_CASE("the notice names the file, the call, the errno, why it was not guarded and the fix") {
  char text[1024];
  UnguardedFailure f;
  f.call = "write";
  f.path = "/mnt/ckpt/model.bin";
  f.error = ESPIPE;
  f.mount_type = "fuse.rclone";
  f.mount_point = "/mnt/ckpt";
  size_t n = format_unguarded_failure(f, text, sizeof text);
  CHECK(std::string(text, n) ==
        "write of /mnt/ckpt/model.bin failed with ESPIPE on fuse.rclone mount /mnt/ckpt; it is "
        "not guarded: no pattern of APPENDGUARD_PATHS='*.safetensors' matches it and the "
        "mount is not among APPENDGUARD_FS's stores; APPENDGUARD_PATHS='*.safetensors:/mnt/ckpt/**' or "
        "APPENDGUARD_FS=fuse.rclone would guard it");
  f.paths = "*.pt";
  n = format_unguarded_failure(f, text, sizeof text);
  CHECK(std::string(text, n).find("APPENDGUARD_PATHS='*.pt:/mnt/ckpt/**'") != std::string::npos);
  // Truncated, still terminated.
  char small[16];
  n = format_unguarded_failure(f, small, sizeof small);
  CHECK(n == 15);
  CHECK(std::string(small) == "write of /mnt/c");
}

TEST_CASE("each file is told once, and past the set's capacity a new file is still told once") {
  ToldFiles told;
  CHECK(told.first_time(file_key(1, 2)));
  CHECK_FALSE(told.first_time(file_key(1, 2)));
  CHECK(told.first_time(file_key(2, 1)));
  CHECK(told.first_time(path_key("/a")));
  CHECK_FALSE(told.first_time(path_key("/a")));
  for (uint64_t k = 100; k < 100 + 2 * ToldFiles::kCapacity; ++k) CHECK(told.first_time(k));
  // The 65th file and every later one is told (a full set used to say nothing more), once while among the
  // last kCapacity told.
  CHECK(told.first_time(999999));
  CHECK_FALSE(told.first_time(999999));
  CHECK_FALSE(told.first_time(100 + 2 * ToldFiles::kCapacity - 1));
}

TEST_CASE("a close is a store's refusal for the store errnos but EBADF (a double close)") {
  for (int e : {EOPNOTSUPP, ENOSYS, EPERM, ESPIPE, EINVAL}) CHECK(is_store_refusal_at_close(e));
  for (int e : {0, EBADF, EIO, EINTR, ENOENT}) CHECK_FALSE(is_store_refusal_at_close(e));
}

TEST_CASE("the close notice names the descriptor, the errno, the FUSE mounts not guarded and the fix") {
  char text[1024];
  UnguardedCloseFailure f;
  f.fd = 7;
  f.error = EPERM;
  f.mounts = "fuse.rclone at /mnt/ckpt";
  size_t n = format_unguarded_close_failure(f, text, sizeof text);
  const std::string said(text, n);
  CHECK(said.starts_with("close(fd 7) failed with EPERM on a descriptor appendguard does not guard"));
  CHECK(said.find("FUSE mounts not guarded here: fuse.rclone at /mnt/ckpt;") != std::string::npos);
  CHECK(said.find("APPENDGUARD_PATHS (now '*.safetensors')") != std::string::npos);
  CHECK(said.find("APPENDGUARD_FS=fuse") != std::string::npos);
  CHECK(said.ends_with("(said once per process)"));
}

TEST_CASE("the FUSE mounts not guarded whole are listed by type and mount point") {
  MountTable table;
  MountSelection selection;  // the known stores
  table.load(
      "36 35 0:40 / /mnt/ckpt rw - fuse.rclone remote: rw\n"
      "37 35 0:41 / /mnt/hdfs rw - fuse fuse_dfs rw\n"
      "38 35 0:42 / /data rw - fuse.sshfs me@host: rw\n"
      "39 35 0:43 / /tmp rw - tmpfs tmpfs rw\n",
      selection);
  char out[256];
  size_t n = table.describe_unguarded_fuse(out, sizeof out);
  CHECK(std::string(out, n) == "fuse.sshfs at /data");
  char small[8];
  n = table.describe_unguarded_fuse(small, sizeof small);
  CHECK(n == 7);
  CHECK(std::string(small) == "fuse.ss");
}

TEST_CASE("a store's refusal of a guarded open names the file, the flags, the error and what works") {
  for (int e : {EPERM, EOPNOTSUPP, ENOSYS, EACCES, EINVAL}) CHECK(is_store_refusal_of_open(e));
  for (int e : {0, ENOENT, EIO, ENOSPC, EEXIST, EISDIR}) CHECK_FALSE(is_store_refusal_of_open(e));
  char text[1024];
  RefusedOpen f;
  f.call = "openat";
  f.path = "/mnt/s/f.bin";
  f.flags = "O_WRONLY|O_CREAT|O_TRUNC";
  f.error = EOPNOTSUPP;
  f.store = "fuse.appendonlyfs at /mnt/s";
  std::string s(text, format_refused_open(f, text, sizeof text));
  CHECK(s.rfind("openat(\"/mnt/s/f.bin\", O_WRONLY|O_CREAT|O_TRUNC) failed with EOPNOTSUPP: the store "
                "(fuse.appendonlyfs at /mnt/s) refused the open itself",
                0) == 0);
  CHECK(s.find("write under a new name") != std::string::npos);
  CHECK(s.find("APPENDGUARD_") == std::string::npos);  // no setting is recommended: none works
  char small[8];
  CHECK(format_refused_open(f, small, sizeof small) == 7);
}

TEST_CASE("a write open of an append-only file is retried with O_APPEND only when the kernel takes it") {
  CHECK(retries_on_append_only_file(EPERM, O_RDWR, O_WRONLY | O_APPEND));
  CHECK(retries_on_append_only_file(EPERM, O_WRONLY, O_WRONLY | O_APPEND));
  CHECK_FALSE(retries_on_append_only_file(EACCES, O_RDWR, O_WRONLY | O_APPEND));
  CHECK_FALSE(retries_on_append_only_file(EPERM, O_WRONLY | O_TRUNC, O_WRONLY | O_TRUNC));
  CHECK_FALSE(
      retries_on_append_only_file(EPERM, O_WRONLY | O_APPEND | O_TRUNC, O_WRONLY | O_APPEND | O_TRUNC));
  char text[1024];
  AppendOnlyRefusal f;
  f.call = "openat";
  f.path = "/t/a";
  f.flags = "O_WRONLY|O_CREAT|O_TRUNC";
  std::string s(text, format_append_only_refusal(f, text, sizeof text));
  CHECK(s.rfind("openat(\"/t/a\", O_WRONLY|O_CREAT|O_TRUNC) failed with EPERM: the file has the kernel's "
                "append-only attribute (chattr +a)",
                0) == 0);
  CHECK(s.find("write under a new name") != std::string::npos);
}

TEST_CASE("a refused rename on a store is said with both paths and what would make it work") {
  for (int e : {EPERM, EOPNOTSUPP, ENOSYS, EACCES, EIO}) {
    CHECK(notes_refused_rename(e, true));
    CHECK_FALSE(notes_refused_rename(e, false));
  }
  for (int e : {0, ENOENT, EXDEV, EEXIST, ENOTEMPTY, EISDIR, EBUSY})
    CHECK_FALSE(notes_refused_rename(e, true));
  char text[1024];
  RefusedRename f;
  f.call = "renameat2";
  f.old_path = "/mnt/h/.f.tmp";
  f.new_path = "/mnt/h/f";
  f.error = EPERM;
  f.store = "fuse.appendonlyfs at /mnt/h";
  std::string s(text, format_refused_rename(f, text, sizeof text));
  CHECK(s.rfind("renameat2(\"/mnt/h/.f.tmp\", \"/mnt/h/f\") failed with EPERM: the store (fuse.appendonlyfs "
                "at /mnt/h) refused the rename",
                0) == 0);
  CHECK(s.find("carries out the rename of a file this process wrote") != std::string::npos);
  CHECK(s.find("remove the target first") != std::string::npos);
  CHECK(s.find("both files are as they were") != std::string::npos);
  f.append_only_target = true;
  s.assign(text, format_refused_rename(f, text, sizeof text));
  CHECK(s.rfind("renameat2(\"/mnt/h/.f.tmp\", \"/mnt/h/f\") failed with EPERM: the target has the kernel's "
                "append-only attribute (chattr +a)",
                0) == 0);
  CHECK(s.find("write under a new name") != std::string::npos);
}
