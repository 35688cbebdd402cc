#include <catch2/catch.hpp>

#include <sys/sysmacros.h>

#include <random>
#include <string>

#include "core/mount_table.h"

using namespace appendguard;

namespace {

// Lines as this kernel writes them (appendonlyfs, rclone, Apache fuse_dfs, mountpoint-s3, a local disk).
const char* kMountinfo =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "40 22 0:35 / /mnt/aofs rw,nosuid,nodev,relatime shared:20 - fuse.appendonlyfs appendonlyfs:hdfs "
    "rw,user_id=0,group_id=0\n"
    "41 40 0:36 / /mnt/aofs/scratch rw,relatime shared:21 - tmpfs tmpfs rw\n"
    "42 22 0:37 / /mnt/rclone rw,relatime shared:22 - fuse.rclone local:/srv rw,user_id=0\n"
    "43 22 0:38 / /export/hdfs rw,relatime - fuse fuse_dfs rw,user_id=0\n"
    "44 22 0:39 / /mnt/s3 rw,relatime - fuse mountpoint-s3 rw,user_id=0\n"
    "45 22 0:40 / /mnt/with\\040space rw - fuse.appendonlyfs appendonlyfs:s3 rw\n"
    "46 22 0:41 / /mnt/other rw - fuse.sshfs host:/x rw\n";

MountSelection selection(const char* text) {
  MountSelection s;
  REQUIRE(parse_mount_selection(text, s).empty());
  return s;
}

const char* mount_of(const MountTable& t, const char* path) {
  const MountEntry* e = t.append_only_mount_of(path);
  return e ? e->mount_point.c_str() : "";
}

}  // namespace

TEST_CASE("a mountinfo line gives its mount point, type and source") {
  MountEntry e;
  REQUIRE(
      parse_mountinfo_line("40 22 0:35 / /mnt/aofs rw,nosuid shared:20 master:3 - fuse.appendonlyfs "
                           "appendonlyfs:hdfs rw",
                           e));
  CHECK(e.mount_point == "/mnt/aofs");
  CHECK(e.type == "fuse.appendonlyfs");
  CHECK(e.source == "appendonlyfs:hdfs");
  REQUIRE(parse_mountinfo_line("45 22 0:40 / /mnt/with\\040space\\134x rw - tmpfs tmpfs rw", e));
  CHECK(e.mount_point == "/mnt/with space\\x");
  CHECK_FALSE(parse_mountinfo_line("40 22 0:35 / /mnt/aofs rw no-separator", e));
  CHECK_FALSE(parse_mountinfo_line("", e));
}

TEST_CASE("a mountinfo line reused for another keeps nothing of the first; escapes and spacing") {
  MountEntry e;
  REQUIRE(
      parse_mountinfo_line("45 22 0:40 / /mnt/a\\040long\\040name\\040here rw,nosuid,nodev,noexec - "
                           "fuse.appendonlyfs appendonlyfs:s3\\011x rw,user_id=0,group_id=0",
                           e));
  CHECK(e.mount_point == "/mnt/a long name here");
  CHECK(e.source == "appendonlyfs:s3\tx");
  CHECK(e.options == "rw,nosuid,nodev,noexec");
  CHECK(e.super_options == "rw,user_id=0,group_id=0");
  // Runs of spaces separate fields; a backslash without three octal digits stays; an escape ends a field.
  REQUIRE(parse_mountinfo_line("46  22 8:1   / /b\\x\\09\\040 ro  -  ext4 /dev/sda1", e));
  CHECK(e.mount_point == "/b\\x\\09 ");
  CHECK(e.type == "ext4");
  CHECK(e.source == "/dev/sda1");
  CHECK(e.options == "ro");
  CHECK(e.super_options.empty());
  CHECK(e.device == makedev(8, 1));
  REQUIRE(parse_mountinfo_line("47 22 nodevice / /c rw - tmpfs x rw", e));
  CHECK(e.device == 0);
  CHECK(e.mount_point == "/c");
  CHECK_FALSE(parse_mountinfo_line("47 22 0:1 / /c rw -", e));  // no type
  CHECK_FALSE(parse_mountinfo_line("47 22 0:1 /", e));
}

TEST_CASE("by default the known stores are append-only, by type or by source") {
  MountTable t;
  t.load(kMountinfo, MountSelection{});
  CHECK(t.any_append_only());
  CHECK(std::string(mount_of(t, "/mnt/aofs/run1/.tmpAbc123")) == "/mnt/aofs");
  CHECK(std::string(mount_of(t, "/mnt/aofs")) == "/mnt/aofs");
  CHECK(std::string(mount_of(t, "/export/hdfs/ckpt/model.bin")) == "/export/hdfs");
  CHECK(std::string(mount_of(t, "/mnt/s3/x")) == "/mnt/s3");
  CHECK(std::string(mount_of(t, "/mnt/with space/x")) == "/mnt/with space");
  // rclone's cache mode is not in mountinfo; held sessions work in every mode, so it is known (issue 8).
  CHECK(std::string(mount_of(t, "/mnt/rclone/x")) == "/mnt/rclone");
  CHECK(std::string(mount_of(t, "/mnt/other/x")).empty());
  CHECK(std::string(mount_of(t, "/home/user/x")).empty());
  CHECK(std::string(mount_of(t, "/mnt/aofsX/y")).empty());         // a prefix of the name is not the mount
  CHECK(std::string(mount_of(t, "/mnt/aofs/scratch/y")).empty());  // a local mount inside it
}

TEST_CASE("APPENDGUARD_FS adds types, sources, mount points, or every FUSE mount") {
  MountTable t;
  t.load(kMountinfo, selection("sshfs"));
  CHECK(std::string(mount_of(t, "/mnt/other/x")) == "/mnt/other");
  CHECK(std::string(mount_of(t, "/mnt/aofs/x")) == "/mnt/aofs");  // lists add to the known stores
  t.load(kMountinfo, selection("fuse.sshfs,/mnt/rclone/"));
  CHECK(std::string(mount_of(t, "/mnt/other/x")) == "/mnt/other");
  CHECK(std::string(mount_of(t, "/mnt/rclone/x")) == "/mnt/rclone");
  t.load(kMountinfo, selection("host:/x"));
  CHECK(std::string(mount_of(t, "/mnt/other/x")) == "/mnt/other");
  t.load(kMountinfo, selection("fuse"));
  CHECK(std::string(mount_of(t, "/mnt/other/x")) == "/mnt/other");
  CHECK(std::string(mount_of(t, "/home/x")).empty());
  t.load(kMountinfo, selection("none"));
  CHECK_FALSE(t.any_append_only());
  CHECK(std::string(mount_of(t, "/mnt/aofs/x")).empty());
}

TEST_CASE("bad APPENDGUARD_FS values say why") {
  MountSelection s;
  CHECK_FALSE(parse_mount_selection("", s).empty());
  CHECK_FALSE(parse_mount_selection("fuse,,rclone", s).empty());
  CHECK_FALSE(parse_mount_selection("none,fuse", s).empty());
  CHECK_FALSE(parse_mount_selection("fuse rclone", s).empty());
  CHECK_FALSE(parse_mount_selection("mnt/hdfs", s).empty());
  CHECK(parse_mount_selection("known", s).empty());
  CHECK(s.known);
  CHECK_FALSE(s.any_fuse);
}

TEST_CASE("a machine with no append-only mount has an empty table") {
  MountTable t;
  t.load("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n", MountSelection{});
  CHECK_FALSE(t.any_append_only());
  CHECK(t.append_only_mount_of("/x") == nullptr);
}

TEST_CASE("each mount is classified as write-once or appending by its type and source") {
  MountTable t;
  t.load(kMountinfo, MountSelection{});
  CHECK(t.store_kind_of("/mnt/rclone/x") == StoreKind::kWriteOnce);
  CHECK(t.store_kind_of("/mnt/s3/x") == StoreKind::kWriteOnce);          // mountpoint-s3 as plain "fuse"
  CHECK(t.store_kind_of("/mnt/with space/x") == StoreKind::kWriteOnce);  // appendonlyfs:s3
  CHECK(t.store_kind_of("/mnt/aofs/x") == StoreKind::kAppends);          // appendonlyfs:hdfs
  CHECK(t.store_kind_of("/mnt/aofs/scratch/x") == StoreKind::kAppends);  // tmpfs inside it
  CHECK(t.store_kind_of("/export/hdfs/x") == StoreKind::kAppends);       // fuse_dfs
  CHECK(t.store_kind_of("/home/x") == StoreKind::kAppends);
  CHECK(t.store_kind_of("/mnt/other/x") == StoreKind::kAppends);
  MountEntry e;
  REQUIRE(parse_mountinfo_line("50 22 0:50 / /gcs rw - fuse.gcsfuse my-bucket rw", e));
  CHECK(classify_store(e) == StoreKind::kWriteOnce);
  CHECK(is_append_only_mount(e, MountSelection{}));
  REQUIRE(parse_mountinfo_line("51 22 0:51 / /s3 rw - fuse.mountpoint-s3 mountpoint-s3 rw", e));
  CHECK(classify_store(e) == StoreKind::kWriteOnce);
  REQUIRE(parse_mountinfo_line("52 22 0:52 / /a rw - fuse.appendonlyfs appendonlyfs:strict rw", e));
  CHECK(classify_store(e) == StoreKind::kAppends);
  REQUIRE(parse_mountinfo_line("53 22 0:53 / /b rw - ext4 appendonlyfs:s3 rw", e));
  CHECK(classify_store(e) == StoreKind::kAppends);  // a source name alone counts only on FUSE
}

TEST_CASE("stores without rename are known: mountpoint-s3, appendonlyfs s3 and volumes") {
  MountTable t;
  t.load(kMountinfo, MountSelection{});
  CHECK_FALSE(t.renames_at("/mnt/s3/x"));          // mountpoint-s3 as plain "fuse"
  CHECK_FALSE(t.renames_at("/mnt/with space/x"));  // appendonlyfs:s3
  CHECK(t.renames_at("/mnt/aofs/x"));              // appendonlyfs:hdfs
  CHECK(t.renames_at("/mnt/rclone/x"));
  CHECK(t.renames_at("/home/x"));
  MountEntry e;
  REQUIRE(parse_mountinfo_line("51 22 0:51 / /s3 rw - fuse.mountpoint-s3 bucket rw", e));
  CHECK_FALSE(store_renames(e));
  REQUIRE(parse_mountinfo_line("52 22 0:52 / /v rw - fuse.appendonlyfs appendonlyfs:volumes rw", e));
  CHECK_FALSE(store_renames(e));
  REQUIRE(parse_mountinfo_line("53 22 0:53 / /g rw - fuse.gcsfuse bucket rw", e));
  CHECK(store_renames(e));
  REQUIRE(parse_mountinfo_line("54 22 0:54 / /b rw - ext4 appendonlyfs:s3 rw", e));
  CHECK(store_renames(e));  // a source name alone counts only on FUSE
}

TEST_CASE("appendonlyfs volumes (Databricks volumes' rules) is a guarded write-once store, like s3") {
  MountEntry e;
  REQUIRE(
      parse_mountinfo_line("54 22 0:54 / /Volumes/c/s/v rw - fuse.appendonlyfs appendonlyfs:volumes rw", e));
  CHECK(classify_store(e) == StoreKind::kWriteOnce);
  CHECK(is_append_only_mount(e, MountSelection{}));
  MountTable t;
  t.load("54 22 0:54 / /Volumes/c/s/v rw - fuse.appendonlyfs appendonlyfs:volumes rw\n", MountSelection{});
  CHECK(t.store_kind_of("/Volumes/c/s/v/model.safetensors") == StoreKind::kWriteOnce);
  REQUIRE(t.append_only_mount_of("/Volumes/c/s/v/model.safetensors") != nullptr);
}

TEST_CASE("a mount's device is read from mountinfo, to notice files on mounts made later") {
  MountEntry e;
  REQUIRE(parse_mountinfo_line("40 22 0:35 / /mnt/aofs rw - fuse.appendonlyfs appendonlyfs:s3 rw", e));
  CHECK(e.device == makedev(0, 35));
  REQUIRE(parse_mountinfo_line("22 1 259:3 / / rw - ext4 /dev/nvme0n1p3 rw", e));
  CHECK(e.device == makedev(259, 3));
  MountTable t;
  t.load(kMountinfo, MountSelection{});
  CHECK(t.knows_device(makedev(0, 37)));  // the rclone mount
  CHECK(t.knows_device(makedev(8, 1)));
  CHECK_FALSE(t.knows_device(makedev(0, 99)));
}

TEST_CASE("the lookups of a kind of mount give what the longest prefix among all mounts gives") {
  // Issue 27: append_only_mount_of and store_kind_of look only at the mounts of their kind and those on or
  // under them. Nested both ways, mounted over, and on "/".
  const std::string mountinfo = std::string(kMountinfo) +
                                "60 42 0:60 / /mnt/rclone/local rw - tmpfs tmpfs rw\n"
                                "61 60 0:61 / /mnt/rclone/local/s3 rw - fuse mountpoint-s3 rw\n"
                                "62 22 0:62 / /mnt/aofs rw - tmpfs tmpfs rw\n"
                                "63 22 0:63 / /mnt/aofs2 rw - fuse.appendonlyfs appendonlyfs:s3 rw\n"
                                "64 22 0:64 / /srv rw - tmpfs tmpfs rw\n";
  for (const char* fs : {"known", "fuse", "/srv", "none", "tmpfs"}) {
    MountTable t;
    MountSelection chosen = selection(fs);
    t.load(mountinfo, chosen);
    for (const char* path :
         {"/", "/x", "/mnt/aofs", "/mnt/aofs/x", "/mnt/aofs/scratch/x", "/mnt/aofs2/x", "/mnt/rclone/x",
          "/mnt/rclone/local/x", "/mnt/rclone/local/s3/x", "/mnt/rclone/localx", "/mnt/s3/a/b", "/mnt/s3x",
          "/export/hdfs/x", "/mnt/with space/x", "/mnt/other/x", "/srv/x", "/srvx"}) {
      CAPTURE(fs, path);
      const MountEntry* any = t.mount_entry_of(path);
      REQUIRE(any);
      const MountEntry* append_only = t.append_only_mount_of(path);
      CHECK(append_only == (is_append_only_mount(*any, chosen) ? any : nullptr));
      CHECK(t.store_kind_of(path) == any->kind);
      // One lookup for both (issue 27: once per guarded open, kept for its close).
      const MountFacts facts = t.facts_of(path);
      CHECK(facts.kind == any->kind);
      CHECK(facts.renames == any->renames);
      CHECK(facts.renames == t.renames_at(path));
    }
  }
}

TEST_CASE("the facts of a path off every write-once store and every store without rename are the defaults") {
  MountTable t;
  t.load(
      "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n40 22 0:35 / /mnt/aofs rw - fuse.appendonlyfs appendonlyfs:hdfs "
      "rw\n",
      MountSelection{});
  for (const char* path : {"/", "/x", "/mnt/aofs/x", "/mnt/aofsx"}) {
    CAPTURE(path);
    CHECK(t.facts_of(path).kind == StoreKind::kAppends);
    CHECK(t.facts_of(path).renames);
  }
  t.load(kMountinfo, MountSelection{});
  // A mount point longer than the path, or a prefix that stops inside a component, is not the mount.
  CHECK(t.facts_of("/mnt/s3").kind == StoreKind::kWriteOnce);
  CHECK_FALSE(t.facts_of("/mnt/s3").renames);
  CHECK(t.facts_of("/mnt/s").renames);
  CHECK(t.facts_of("/mnt/s3x/y").renames);
  CHECK(t.facts_of("/mnt/s3x/y").kind == StoreKind::kAppends);
  CHECK(t.facts_of("/mnt/rclone/y").kind == StoreKind::kWriteOnce);
  CHECK(t.facts_of("/mnt/rclone/y").renames);
}

TEST_CASE("a known device is found again at once, and an unknown one is not") {
  MountTable t;
  t.load(kMountinfo, MountSelection{});
  for (int round = 0; round < 2; ++round) {
    CHECK(t.knows_device(makedev(0, 37)));
    CHECK(t.knows_device(makedev(0, 37)));  // the one found last
    CHECK_FALSE(t.knows_device(makedev(0, 99)));
    CHECK(t.knows_device(makedev(8, 1)));
    CHECK_FALSE(t.knows_device(makedev(0, 99)));
  }
  const MountTable copy = t;  // the index is copied with the table, and checked
  CHECK(copy.knows_device(makedev(8, 1)));
  t.load("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n", MountSelection{});
  CHECK_FALSE(t.knows_device(makedev(0, 37)));
  CHECK(t.knows_device(makedev(8, 1)));
}

TEST_CASE("a directory is clear of the append-only mounts when no point is it, above it or under it") {
  MountTable t;
  t.load(kMountinfo, MountSelection{});  // append-only: /mnt/aofs, /mnt/rclone, /export/hdfs, /mnt/s3...
  CHECK(t.clear_of_append_only_mounts("/home/user"));
  CHECK(t.clear_of_append_only_mounts("/mnt/other"));  // sshfs: not append-only
  CHECK(t.clear_of_append_only_mounts("/mnt/aofsx"));  // a prefix inside a component is not a point
  CHECK(t.clear_of_append_only_mounts("/export/hdfsx/a"));
  CHECK_FALSE(t.clear_of_append_only_mounts("/mnt"));  // "mnt/aofs/x" from here is on one
  CHECK_FALSE(t.clear_of_append_only_mounts("/"));
  CHECK_FALSE(t.clear_of_append_only_mounts("/mnt/aofs"));
  CHECK_FALSE(t.clear_of_append_only_mounts("/mnt/aofs/scratch"));  // a tmpfs inside: still not told
  CHECK_FALSE(t.clear_of_append_only_mounts("/export"));
  CHECK_FALSE(t.clear_of_append_only_mounts("/mnt/with space/d"));
  CHECK_FALSE(t.clear_of_append_only_mounts("relative"));
  CHECK_FALSE(t.clear_of_append_only_mounts(""));
  t.load("22 1 8:1 / / rw - fuse.appendonlyfs appendonlyfs:hdfs rw\n", MountSelection{});
  CHECK_FALSE(t.clear_of_append_only_mounts("/home"));  // a store on "/" holds every directory
  // Clear means every plain path joined to the directory is off the append-only mounts.
  t.load(kMountinfo, MountSelection{});
  for (const char* directory : {"/home/user", "/mnt/other", "/mnt/aofsx", "/", "/mnt", "/export"}) {
    if (!t.clear_of_append_only_mounts(directory)) continue;
    for (const char* name : {"x", "aofs/x", "mnt/aofs/x", "a/b/c"}) {
      const std::string full = std::string(directory) + "/" + name;
      CAPTURE(full);
      CHECK(t.append_only_mount_of(full) == nullptr);
    }
  }
}

TEST_CASE("the clear directory cache answers only for the same directory and table") {
  MountTable one;
  MountTable two;
  ClearDirectoryCache cache;
  const DirectoryIdentity home{30, 1234};
  CHECK_FALSE(cache.holds(&one, home));
  CHECK_FALSE(cache.holds(nullptr, DirectoryIdentity{}));  // empty: a zero identity is not held
  cache.remember(&one, home);
  CHECK(cache.holds(&one, home));
  CHECK_FALSE(cache.holds(&two, home));                         // the table changed (a refresh)
  CHECK_FALSE(cache.holds(&one, DirectoryIdentity{30, 1235}));  // a chdir to another directory
  CHECK_FALSE(cache.holds(&one, DirectoryIdentity{31, 1234}));  // the same inode through another mount
  CHECK_FALSE(cache.holds(nullptr, home));
  cache.remember(&two, DirectoryIdentity{31, 1234});
  CHECK_FALSE(cache.holds(&one, home));
  CHECK(cache.holds(&two, DirectoryIdentity{31, 1234}));
}

TEST_CASE("a path no append-only mount can hold is told without joining it") {
  // Issue 27: may_be_on_append_only_mount(split path) false means append_only_mount_of(normalized path) is
  // null, over nested mounts (an append-only one under a plain one and the reverse), mounted-over ones and
  // one on "/".
  const std::string nested = std::string(kMountinfo) +
                             "60 42 0:60 / /mnt/rclone/local rw - tmpfs tmpfs rw\n"
                             "61 60 0:61 / /mnt/rclone/local/s3 rw - fuse mountpoint-s3 rw\n"
                             "62 22 0:62 / /mnt/aofs rw - tmpfs tmpfs rw\n"
                             "63 22 0:63 / /mnt/aofs2 rw - fuse.appendonlyfs appendonlyfs:s3 rw\n"
                             "64 22 0:64 / /srv/a rw - tmpfs tmpfs rw\n"
                             "65 64 0:65 / /srv/a/b rw - fuse.appendonlyfs appendonlyfs:hdfs rw\n";
  const std::string on_root =
      "22 1 8:1 / / rw - fuse.appendonlyfs appendonlyfs:hdfs rw\n"
      "23 22 0:2 / /tmp rw - tmpfs tmpfs rw\n";
  static const char* const kParts[] = {"",        ".",      "..",    "mnt", "aofs", "aofs2",
                                       "scratch", "rclone", "local", "s3",  "srv",  "a",
                                       "b",       "x",      "tmp",   ".h",  "aofsx"};
  std::mt19937 random(2027);
  auto random_path = [&](bool absolute) {
    std::string path = absolute ? "/" : "";
    const size_t count = random() % 6;
    for (size_t i = 0; i < count; ++i) {
      if (i > 0) path += '/';
      path += kParts[random() % (sizeof kParts / sizeof kParts[0])];
    }
    return path;
  };
  for (const std::string& mountinfo : {nested, on_root}) {
    for (const char* fs : {"known", "fuse", "/srv", "none", "tmpfs"}) {
      MountTable t;
      t.load(mountinfo, selection(fs));
      size_t told = 0;
      size_t outside = 0;
      for (int i = 0; i < 20000; ++i) {
        const std::string base = random_path(true);
        const std::string path = random_path(random() % 2 == 0);
        char full[256];
        const size_t n = normalize_path(base, path, full, sizeof full);
        if (n == 0) continue;
        CAPTURE(mountinfo, fs, base, path, full);
        SplitPath split;
        const bool on = t.append_only_mount_of(full) != nullptr;
        if (!on) ++outside;
        if (!split_normal_path(base, path, split) || t.may_be_on_append_only_mount(split)) continue;
        ++told;
        REQUIRE_FALSE(on);
      }
      CAPTURE(fs);
      // Every path outside the append-only mounts that is split and not under one of their points is
      // told (the test is not vacuous): on "/" none is.
      if (mountinfo == nested && std::string(fs) != "fuse") CHECK(told > outside / 8);
      if (mountinfo == on_root && std::string(fs) != "none" && std::string(fs) != "tmpfs") CHECK(told == 0);
    }
  }
}
