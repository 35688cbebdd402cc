#include <catch2/catch.hpp>

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

TEST_CASE("each file is told once, and a full set tells no more") {
  ToldFiles told;
  CHECK(told.first_time(file_key(1, 2)));
  CHECK_FALSE(told.first_time(file_key(1, 2)));
  CHECK(told.first_time(file_key(2, 1)));
  CHECK(told.first_time(path_key("/a")));
  CHECK_FALSE(told.first_time(path_key("/a")));
  for (uint64_t k = 100; told.first_time(k); ++k) {
  }
  CHECK_FALSE(told.first_time(999999));
}
