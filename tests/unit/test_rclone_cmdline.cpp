// rclone's --vfs-cache-mode from the command line of the process serving a mount (issue 23), and what the
// mount table makes of it.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/mount_table.h"
#include "core/rclone_cmdline.h"

using namespace appendguard;

namespace {

// argv as /proc/PID/cmdline holds it: each argument followed by a NUL.
std::string cmdline(std::initializer_list<const char*> args) {
  std::string text;
  for (const char* arg : args) {
    text += arg;
    text.push_back('\0');
  }
  return text;
}

RcloneProcess process(std::string cmd, std::string environ = "", std::string cwd = "/home/u") {
  return RcloneProcess{std::move(cmd), std::move(environ), std::move(cwd)};
}

const char* mode_for(const RcloneProcess& p, const char* mount_point) {
  return rclone_cache_mode_name(rclone_mode_serving(p, mount_point));
}

}  // namespace

TEST_CASE("rclone's cache mode comes from its command line, default off") {
  auto writes =
      process(cmdline({"rclone", "mount", "remote:bucket", "/mnt/r", "--vfs-cache-mode", "writes"}));
  CHECK(std::string(mode_for(writes, "/mnt/r")) == "writes");
  CHECK(std::string(mode_for(writes, "/mnt/other")) == "unknown");     // it serves another mount point
  CHECK(std::string(mode_for(writes, "remote:bucket")) == "unknown");  // a source is not a mount point...
  auto full = process(cmdline({"/usr/bin/rclone", "mount", "--vfs-cache-mode=full", "s3:b", "/mnt/r/"}));
  CHECK(std::string(mode_for(full, "/mnt/r")) == "full");  // trailing slash ignored
  auto absent = process(cmdline({"rclone", "cmount", "s3:b", "/mnt/r", "--daemon"}));
  CHECK(std::string(mode_for(absent, "/mnt/r")) == "off");
  auto minimal = process(cmdline({"rclone", "nfsmount", "--vfs-cache-mode", "minimal", "s3:b", "/mnt/r"}));
  CHECK(std::string(mode_for(minimal, "/mnt/r")) == "minimal");
  // The last flag wins, as rclone takes it.
  auto twice = process(
      cmdline({"rclone", "mount", "--vfs-cache-mode", "off", "s3:b", "/mnt/r", "--vfs-cache-mode=writes"}));
  CHECK(std::string(mode_for(twice, "/mnt/r")) == "writes");
  // Not a mount command: rclone serve, rclone copy naming the same folder.
  CHECK(std::string(mode_for(process(cmdline({"rclone", "copy", "/mnt/r", "s3:b"})), "/mnt/r")) == "unknown");
  // A value rclone would reject: unknown (the library keeps its cautious default).
  auto bad = process(cmdline({"rclone", "mount", "s3:b", "/mnt/r", "--vfs-cache-mode", "sometimes"}));
  CHECK(std::string(mode_for(bad, "/mnt/r")) == "unknown");
  CHECK(std::string(mode_for(process(""), "/mnt/r")) == "unknown");  // cmdline unreadable (exited)
}

TEST_CASE("rclone's cache mode from its environment, relative mount points, spaces") {
  std::string env = std::string("HOME=/root") + '\0' + "RCLONE_VFS_CACHE_MODE=writes" + '\0';
  auto from_env = process(cmdline({"rclone", "mount", "s3:b", "/mnt/r"}), env);
  CHECK(std::string(mode_for(from_env, "/mnt/r")) == "writes");
  // The command line wins over the environment.
  auto flag = process(cmdline({"rclone", "mount", "s3:b", "/mnt/r", "--vfs-cache-mode", "off"}), env);
  CHECK(std::string(mode_for(flag, "/mnt/r")) == "off");
  auto relative =
      process(cmdline({"rclone", "mount", "s3:b", "mnt", "--vfs-cache-mode", "full"}), "", "/home/u");
  CHECK(std::string(mode_for(relative, "/home/u/mnt")) == "full");
  auto dot = process(cmdline({"rclone", "mount", "s3:b", "./mnt/"}), "", "/home/u/");
  CHECK(std::string(mode_for(dot, "/home/u/mnt")) == "off");
  CHECK(std::string(mode_for(process(cmdline({"rclone", "mount", "s3:b", "mnt"}), "", ""), "/home/u/mnt")) ==
        "unknown");  // cwd unreadable
  // A mount point with a space: mountinfo shows it as \040, the table unescapes it, argv has it plain.
  auto spaced = process(cmdline({"rclone", "mount", "s3:b", "/mnt/my ckpt", "--vfs-cache-mode", "writes"}));
  MountEntry entry;
  REQUIRE(parse_mountinfo_line("50 22 0:41 / /mnt/my\\040ckpt rw - fuse.rclone s3:b rw", entry));
  set_rclone_mode(entry, {spaced});
  CHECK(entry.rclone_mode == RcloneCacheMode::kWrites);
  CHECK(is_rclone_comm("rclone\n"));
  CHECK_FALSE(is_rclone_comm("rclonex\n"));
}

TEST_CASE("rclone writes/full mounts are not write-once nor guarded whole; off, minimal, unseen are") {
  const char* info =
      "42 22 0:37 / /mnt/w rw - fuse.rclone s3:a rw\n"
      "43 22 0:38 / /mnt/f rw - fuse.rclone s3:b rw\n"
      "44 22 0:39 / /mnt/o rw - fuse.rclone s3:c rw\n"
      "45 22 0:40 / /mnt/m rw - fuse.rclone s3:d rw\n"
      "46 22 0:41 / /mnt/u rw - fuse.rclone s3:e rw\n";
  CHECK(has_rclone_mount(info));
  CHECK_FALSE(has_rclone_mount("40 22 0:35 / /mnt/a rw - fuse.appendonlyfs appendonlyfs:hdfs rw\n"));
  std::vector<RcloneProcess> procs = {
      process(cmdline({"rclone", "mount", "s3:a", "/mnt/w", "--vfs-cache-mode", "writes"})),
      process(cmdline({"rclone", "mount", "s3:b", "/mnt/f", "--vfs-cache-mode=full"})),
      process(cmdline({"rclone", "mount", "s3:c", "/mnt/o"})),
      process(cmdline({"rclone", "mount", "s3:d", "/mnt/m", "--vfs-cache-mode", "minimal"})),
  };
  MountSelection known;
  REQUIRE(parse_mount_selection("known", known).empty());
  MountTable t;
  t.load(info, known, procs);
  CHECK(t.append_only_mount_of("/mnt/w/x") == nullptr);
  CHECK(t.append_only_mount_of("/mnt/f/x") == nullptr);
  CHECK(t.append_only_mount_of("/mnt/o/x") != nullptr);
  CHECK(t.append_only_mount_of("/mnt/m/x") != nullptr);
  CHECK(t.append_only_mount_of("/mnt/u/x") != nullptr);  // no process seen: as before
  CHECK(t.store_kind_of("/mnt/w/x") == StoreKind::kAppends);
  CHECK(t.store_kind_of("/mnt/f/x") == StoreKind::kAppends);
  CHECK(t.store_kind_of("/mnt/o/x") == StoreKind::kWriteOnce);
  CHECK(t.store_kind_of("/mnt/m/x") == StoreKind::kWriteOnce);
  CHECK(t.store_kind_of("/mnt/u/x") == StoreKind::kWriteOnce);
  CHECK(t.mount_entry_of("/mnt/w/x")->rclone_mode == RcloneCacheMode::kWrites);
  CHECK(t.any_unguarded_fuse());  // writes and full: their failures are watched like any unguarded FUSE
  // Named explicitly, a cached rclone mount is guarded whole all the same (the user asked).
  MountSelection named;
  REQUIRE(parse_mount_selection("/mnt/w", named).empty());
  t.load(info, named, procs);
  CHECK(t.append_only_mount_of("/mnt/w/x") != nullptr);
  CHECK(t.append_only_mount_of("/mnt/f/x") == nullptr);
  // Without the processes (the CLI's old call, /proc hidden): every rclone mount as before.
  t.load(info, known);
  CHECK(t.append_only_mount_of("/mnt/w/x") != nullptr);
  CHECK(t.store_kind_of("/mnt/w/x") == StoreKind::kWriteOnce);
}
