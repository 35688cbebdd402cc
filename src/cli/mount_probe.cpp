#include "cli/mount_probe.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/errno_names.h"

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

std::string with_library(Rule rule, const std::vector<ProbeResult>& results) {
  const bool append = accepted(results, Rule::kAppend);
  const bool create = accepted(results, Rule::kCreate);
  switch (rule) {
    case Rule::kCreate:
    case Rule::kAppend:
    case Rule::kRename:
    case Rule::kRenameOntoExisting:
      return accepted(results, rule) ? "works (passed through)" : "fails as without (passed through)";
    case Rule::kReadWriteOpen:
    case Rule::kWriteOnlyOpen:
      if (accepted(results, rule) && rule == Rule::kReadWriteOpen && append) {
        return "works (rewritten to an append open, so later writes are checked)";
      }
      if (append) return "works (rewritten to an append open)";
      if (create) return "works only with APPENDGUARD_REOPEN=rewrite (truncate and write the bytes back)";
      return "fails: this mount accepts neither appends nor truncating opens";
    case Rule::kWriteBelowEnd:
      return "refused by the library with a report naming the call site: needs a code change";
    case Rule::kTruncate:
      return "refused with a report (to the current size: answered 0; growing: deferred)";
    case Rule::kFallocate:
      return append ? "works (deferred: zeros appended at the last close; APPENDGUARD_PREALLOC=defer)"
                    : "deferred, but the zeros cannot be appended here";
  }
  return "";
}

std::vector<std::string> recommendations(const MountInfo& mount, bool known,
                                         const std::vector<ProbeResult>& results) {
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
  if (!accepted(results, Rule::kAppend) && accepted(results, Rule::kCreate)) {
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
  const std::string base = dir + "/.appendguard-doctor-" + std::to_string(getpid());
  const std::string a = base + ".a", b = base + ".b", c = base + ".c";
  auto fresh = [&](const std::string& path) -> int {  // a new file holding "abcd"; 0 or the errno
    unlink(path.c_str());
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC, 0644);
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

  int fd = open(a.c_str(), O_RDWR | O_CLOEXEC);
  record(Rule::kReadWriteOpen, fd < 0 ? errno : finish(fd, 0));

  fresh(a);
  fd = open(a.c_str(), O_WRONLY | O_CLOEXEC);
  record(Rule::kWriteOnlyOpen, fd < 0 ? errno : finish(fd, 0));

  fresh(a);
  fd = open(a.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    record(Rule::kAppend, errno);
  } else {
    int e = write(fd, "efgh", 4) == 4 ? 0 : errno ? errno : EIO;
    record(Rule::kAppend, finish(fd, e));
  }

  fresh(a);
  fd = open(a.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fd = open(a.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    record(Rule::kWriteBelowEnd, errno);
  } else {
    int e = pwrite(fd, "x", 1, 0) == 1 ? 0 : errno ? errno : EIO;
    record(Rule::kWriteBelowEnd, finish(fd, e));
  }

  fresh(a);
  fd = open(a.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) fd = open(a.c_str(), O_RDWR | O_CLOEXEC);
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
  fresh(c);
  const std::string& from = access(b.c_str(), F_OK) == 0 ? b : a;
  record(Rule::kRenameOntoExisting, rename(from.c_str(), c.c_str()) == 0 ? 0 : errno);

  for (const std::string* path : {&a, &b, &c}) unlink(path->c_str());
  for (ProbeResult& r : results) {
    r.detail =
        r.error == 0 ? "accepted" : "refused (" + errno_word(r.error) + ": " + std::strerror(r.error) + ")";
  }
  return results;
}

}  // namespace appendguard
