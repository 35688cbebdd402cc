#include "cli/mount_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/errno_names.h"
#include "core/rename_plan.h"

namespace appendguard {
namespace {

bool covers(std::string_view mount_point, std::string_view path) {
  if (mount_point == "/") return true;
  return path.substr(0, mount_point.size()) == mount_point &&
         (path.size() == mount_point.size() || path[mount_point.size()] == '/');
}

const ProbeResult* find(const std::vector<ProbeResult>& results, Rule rule) {
  for (const ProbeResult& r : results) {
    if (r.rule == rule) return &r;
  }
  return nullptr;
}

bool accepted(const std::vector<ProbeResult>& results, Rule rule) {
  const ProbeResult* r = find(results, rule);
  return r && r->error == 0;
}

std::string errno_word(int err) {
  const char* name = linux_errno_name(err);
  return name ? name : std::to_string(err);
}

}  // namespace

std::vector<RcloneProcess> read_rclone_processes() {
  std::vector<RcloneProcess> found;
  auto read_all = [](const std::string& path, std::string& out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return true;
  };
  DIR* proc = opendir("/proc");
  if (!proc) return found;
  while (const dirent* entry = readdir(proc)) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    std::string base = std::string("/proc/") + entry->d_name;
    std::string comm;
    if (!read_all(base + "/comm", comm) || !is_rclone_comm(comm)) continue;
    RcloneProcess process;
    if (!read_all(base + "/cmdline", process.cmdline)) continue;
    read_all(base + "/environ", process.environ);
    char cwd[PATH_MAX];
    ssize_t length = readlink((base + "/cwd").c_str(), cwd, sizeof cwd);
    if (length > 0 && static_cast<size_t>(length) < sizeof cwd)
      process.cwd.assign(cwd, static_cast<size_t>(length));
    found.push_back(std::move(process));
  }
  closedir(proc);
  return found;
}

bool mount_of(std::string_view mountinfo, std::string_view path, MountInfo& out) {
  bool found = false;
  size_t best = 0;
  while (!mountinfo.empty()) {
    size_t newline = mountinfo.find('\n');
    std::string_view line = mountinfo.substr(0, newline);
    mountinfo.remove_prefix(newline == std::string_view::npos ? mountinfo.size() : newline + 1);
    MountEntry entry;
    if (!parse_mountinfo_line(line, entry) || !covers(entry.mount_point, path)) continue;
    if (found && entry.mount_point.size() < best) continue;
    if (has_rclone_mount(line)) set_rclone_mode(entry, read_rclone_processes());
    MountInfo info;
    info.options = entry.options;
    info.super_options = entry.super_options;
    info.entry = std::move(entry);
    best = info.entry.mount_point.size();
    out = std::move(info);
    found = true;
  }
  return found;
}

const char* rule_name(Rule rule) {
  switch (rule) {
    case Rule::kCreate:
      return "create a new file and write";
    case Rule::kReadWriteOpen:
      return "read-write open of an existing file";
    case Rule::kWriteOnlyOpen:
      return "write-only open without truncation";
    case Rule::kAppend:
      return "append to an existing file";
    case Rule::kWriteBelowEnd:
      return "write below the end";
    case Rule::kTruncate:
      return "truncate below the end";
    case Rule::kFallocate:
      return "fallocate past the end";
    case Rule::kRename:
      return "rename";
    case Rule::kRenameOntoExisting:
      return "rename onto an existing file";
  }
  return "?";
}

namespace {

// The library's plan for a rename the store answered with `error` (core/rename_plan.h), for a file the
// process wrote (what the probe renames).
std::string rename_with_library(int error, bool store_renames, bool create) {
  if (error == 0) return "works (passed through)";
  RenameFacts facts;
  facts.source = RenameSource::kWritten;
  facts.store_renames = store_renames;
  facts.error = error;
  if (plan_rename(facts) != RenamePlan::kCopy) return "fails as without (passed through)";
  if (!create) return "fails: carried out as a copy, which needs new files, refused here";
  return "works for files the program wrote (carried out: O_EXCL files spooled and uploaded once, others "
         "copied)";
}

}  // namespace

std::string with_library(Rule rule, const std::vector<ProbeResult>& results, ReopenChoice choice,
                         bool store_renames) {
  const bool append = accepted(results, Rule::kAppend);
  const bool create = accepted(results, Rule::kCreate);
  const bool anew = choice != ReopenChoice::kAppend;  // hold and rewrite write an existing file anew
  switch (rule) {
    case Rule::kCreate:
      return accepted(results, rule) ? "works (passed through)" : "fails as without (passed through)";
    case Rule::kRename:
    case Rule::kRenameOntoExisting: {
      const ProbeResult* r = find(results, rule);
      return rename_with_library(r ? r->error : 0, store_renames, create);
    }
    case Rule::kAppend:
      if (!anew)
        return accepted(results, rule) ? "works (passed through)" : "fails as without (passed through)";
      return create ? "written anew (truncating open, old bytes written back, up to 8 MiB), then appended"
                    : "fails: written anew needs a truncating open, refused here";
    case Rule::kReadWriteOpen:
    case Rule::kWriteOnlyOpen:
      if (anew) {
        return create ? "works (written anew: truncating open, old bytes written back, up to 8 MiB)"
                      : "fails: written anew needs a truncating open, refused here";
      }
      if (accepted(results, rule) && rule == Rule::kReadWriteOpen && append) {
        return "works (rewritten to an append open, so later writes are checked)";
      }
      if (append) return "works (rewritten to an append open)";
      if (create) return "fails: appends refused; APPENDGUARD_REOPEN=rewrite writes the file anew";
      return "fails: this mount accepts neither appends nor truncating opens";
    case Rule::kWriteBelowEnd:
      return "refused by the library with a report naming the call site: needs a code change";
    case Rule::kTruncate:
      return "refused with a report (to the current size: answered 0; growing: deferred)";
    case Rule::kFallocate:
      if (anew ? create : append)
        return "works (deferred: zeros appended at the last close; APPENDGUARD_PREALLOC=defer)";
      return "deferred, but the zeros cannot be appended here";
  }
  return "";
}

std::string describe_reopen(ReopenChoice choice, Reopen setting, StoreKind kind) {
  std::string why = setting == Reopen::kAuto
                        ? std::string("APPENDGUARD_REOPEN=auto on a store of kind ") + store_kind_name(kind)
                        : std::string("APPENDGUARD_REOPEN=") + reopen_name(setting);
  switch (choice) {
    case ReopenChoice::kHold:
      return std::string("hold (") + why +
             "): a file this process created or truncated is held at close and reused by its next write "
             "open; an existing file opened keeping its bytes is written anew (up to 8 MiB)";
    case ReopenChoice::kRewrite:
      return std::string("rewrite (") + why +
             "): an existing file opened keeping its bytes is written anew (truncating open, old bytes "
             "written back, up to 8 MiB)";
    case ReopenChoice::kAppend:
      break;
  }
  return std::string("append (") + why + "): an existing file opened for writing is reopened with O_APPEND";
}

const std::vector<ShellCase>& shell_cases() {
  static const std::vector<ShellCase> cases = {
      {"create (printf > new file)", nullptr, "printf abcd > \"$1\"", "abcd", false},
      {"overwrite (printf > existing file)", "abcd", "printf efgh > \"$1\"", "efgh", false},
      {"append without a seek (>>)", "abcd", "printf efgh >> \"$1\"", "abcdefgh", false},
      {"append without a seek (dd oflag=append)", "abcd",
       "printf efgh | dd of=\"$1\" oflag=append conv=notrunc status=none", "abcdefgh", false},
      {"write at the end (dd seek=1 bs=4)", "abcd",
       "printf efgh | dd of=\"$1\" bs=4 seek=1 conv=notrunc status=none", "abcdefgh", false},
      {"write below the end (dd at 0)", "abcd", "printf x | dd of=\"$1\" conv=notrunc status=none", "xbcd",
       true},
  };
  return cases;
}

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kWorks:
      return "works";
    case Outcome::kRefusedLoudly:
      return "refused loudly, file intact";
    case Outcome::kFailsIntact:
      return "fails, file intact";
    case Outcome::kWrongBytes:
      return "WRONG BYTES, exit 0";
    case Outcome::kFileChanged:
      return "FAILS, FILE CHANGED";
  }
  return "?";
}

Outcome classify_case(const ShellCase& c, bool exited_zero, bool appendguard_line, bool exists,
                      const std::string& content) {
  if (exited_zero) return exists && content == c.expected ? Outcome::kWorks : Outcome::kWrongBytes;
  const bool intact = c.initial == nullptr || (exists && content == c.initial);
  if (!intact) return Outcome::kFileChanged;
  return appendguard_line ? Outcome::kRefusedLoudly : Outcome::kFailsIntact;
}

std::string case_problem(const ShellCase& c, Outcome without, Outcome with) {
  if (c.must_refuse) {
    return with == Outcome::kRefusedLoudly
               ? ""
               : std::string("must be refused by the library, was: ") + outcome_name(with);
  }
  if (with == Outcome::kWorks) return "";
  if (without == Outcome::kWorks) {
    return std::string("worse than without: works without the library, ") + outcome_name(with) + " with it";
  }
  if (with == Outcome::kRefusedLoudly) return "";
  return std::string(outcome_name(with)) + " with the library";
}

Outcome run_shell_case(const ShellCase& c, const std::string& dir, const std::string& library) {
  static int serial = 0;
  const std::string path = dir + "/appendguard-doctor-" + std::to_string(getpid()) + "-" +
                           std::to_string(++serial) + ".safetensors";
  unlink(path.c_str());
  if (c.initial) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ssize_t n = write(fd, c.initial, std::strlen(c.initial));
      (void)n;
      close(fd);
    }
  }
  char log_template[] = "/tmp/appendguard-doctor-log-XXXXXX";
  int log = mkstemp(log_template);
  if (log >= 0) unlink(log_template);
  pid_t child = fork();
  if (child == 0) {
    if (log >= 0) dup2(log, 2);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) dup2(null, 1), dup2(null, 0);
    if (library.empty()) {
      std::vector<std::string> ours;
      for (char** e = environ; *e; ++e) {
        if (std::strncmp(*e, "APPENDGUARD", 11) == 0) ours.emplace_back(*e, std::strcspn(*e, "="));
      }
      for (const std::string& name : ours) unsetenv(name.c_str());
      unsetenv("LD_PRELOAD");
    } else {
      setenv("LD_PRELOAD", library.c_str(), 1);
      const char* mode = getenv("APPENDGUARD");
      if (!mode || !*mode) setenv("APPENDGUARD", "1", 1);
      setenv("APPENDGUARD_LOG", "stderr", 1);
    }
    execl("/bin/sh", "sh", "-c", c.script, "sh", path.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (child > 0) waitpid(child, &status, 0);
  bool loud = false;
  if (log >= 0) {
    std::string text;
    char buffer[4096];
    lseek(log, 0, SEEK_SET);
    for (ssize_t n; (n = read(log, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
    close(log);
    loud = text.rfind("appendguard:", 0) == 0 || text.find("\nappendguard:") != std::string::npos;
  }
  std::ifstream in(path, std::ios::binary);
  const bool exists = static_cast<bool>(in);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  unlink(path.c_str());
  const bool ok = child > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return classify_case(c, ok, loud, exists, content);
}

std::vector<std::string> recommendations(const MountInfo& mount, bool known,
                                         const std::vector<ProbeResult>& results, ReopenChoice choice) {
  std::vector<std::string> lines;
  bool all = true;
  for (const ProbeResult& r : results) all = all && r.error == 0;
  if (all) {
    lines.push_back(
        "this directory accepts every write: the library is not needed here (it changes nothing "
        "but the rewritten opens)");
    return lines;
  }
  if (known) {
    lines.push_back("every file written under " + mount.entry.mount_point +
                    " is guarded (a known append-only store: APPENDGUARD_FS=known, the default)");
  } else {
    lines.push_back("APPENDGUARD_FS=" + mount.entry.mount_point +
                    " to guard every file written on this mount whatever its name (or "
                    "APPENDGUARD_PATHS naming them)");
  }
  // Only where it changes something: hold and rewrite already write an existing file anew.
  if (choice == ReopenChoice::kAppend && !accepted(results, Rule::kAppend) &&
      accepted(results, Rule::kCreate)) {
    lines.push_back(
        "APPENDGUARD_REOPEN=rewrite: this mount refuses appends to existing files but accepts "
        "truncating opens (mountpoint-s3 style)");
  }
  if (!accepted(results, Rule::kWriteBelowEnd)) {
    lines.push_back(
        "APPENDGUARD=audit on a local disk first: it lists every write below the end (the code "
        "changes needed) without changing anything");
  }
  return lines;
}

std::vector<ProbeResult> probe_directory(const std::string& dir, std::string& error) {
  std::vector<ProbeResult> results;
  const std::string base = dir + "/probe";
  // A new name for every rule: rclone --vfs-cache-mode minimal was seen to hang an unlink (for good) of a
  // name just opened read-write, removed and created again.
  std::vector<std::string> names;
  std::string a;
  const std::string b = base + ".b";
  auto fresh = [&](std::string& path) -> int {  // a new file holding "abcd"; 0 or the errno
    path = base + "." + std::to_string(names.size());
    names.push_back(path);
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    int err = write(fd, "abcd", 4) == 4 ? 0 : errno ? errno : EIO;
    if (close(fd) != 0 && err == 0) err = errno;
    return err;
  };
  auto finish = [](int fd, int err) -> int {  // close and keep the first errno
    if (fd >= 0 && close(fd) != 0 && err == 0) err = errno;
    return err;
  };
  auto record = [&](Rule rule, int err) { results.push_back(ProbeResult{rule, err, {}}); };

  int err = fresh(a);
  if (err != 0) {
    error = "cannot create a scratch file in " + dir + ": " + std::strerror(err);
    unlink(a.c_str());
    return {};
  }
  record(Rule::kCreate, 0);

  int fd = open(a.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  record(Rule::kReadWriteOpen, fd < 0 ? errno : finish(fd, 0));

  fresh(a);
  fd = open(a.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  record(Rule::kWriteOnlyOpen, fd < 0 ? errno : finish(fd, 0));

  fresh(a);
  fd = open(a.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    record(Rule::kAppend, errno);
  } else {
    int e = write(fd, "efgh", 4) == 4 ? 0 : errno ? errno : EIO;
    record(Rule::kAppend, finish(fd, e));
  }

  fresh(a);
  fd = open(a.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fd = open(a.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    record(Rule::kWriteBelowEnd, errno);
  } else {
    int e = pwrite(fd, "x", 1, 0) == 1 ? 0 : errno ? errno : EIO;
    record(Rule::kWriteBelowEnd, finish(fd, e));
  }

  fresh(a);
  fd = open(a.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fd = open(a.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    record(Rule::kTruncate, errno);
    record(Rule::kFallocate, errno);
  } else {
    record(Rule::kTruncate, ftruncate(fd, 2) == 0 ? 0 : errno);
    int e = fallocate(fd, 0, 0, 8192) == 0 ? 0 : errno;
    record(Rule::kFallocate, finish(fd, e));
  }

  fresh(a);
  record(Rule::kRename, rename(a.c_str(), b.c_str()) == 0 ? 0 : errno);
  std::string c_name;
  fresh(c_name);
  const std::string& from = access(b.c_str(), F_OK) == 0 ? b : a;
  record(Rule::kRenameOntoExisting, rename(from.c_str(), c_name.c_str()) == 0 ? 0 : errno);

  names.push_back(b);
  for (const std::string& path : names) unlink(path.c_str());
  for (ProbeResult& r : results) {
    r.detail =
        r.error == 0 ? "accepted" : "refused (" + errno_word(r.error) + ": " + std::strerror(r.error) + ")";
  }
  return results;
}

}  // namespace appendguard
