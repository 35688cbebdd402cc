#include "cli/binary_check.h"

#include <elf.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cli/input_file.h"

namespace appendguard {
namespace {

bool contains(const std::vector<char>& data, const char* needle) {
  return std::search(data.begin(), data.end(), needle, needle + std::strlen(needle)) != data.end();
}

bool is_regular(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

std::string find_in_path(const std::string& command) {
  if (command.find('/') != std::string::npos) return command;
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + command;
    if (access(candidate.c_str(), X_OK) == 0 && is_regular(candidate)) return candidate;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return {};
}

// The program a "#!" line runs: its first word, or for "/usr/bin/env NAME" the NAME found in PATH.
std::string script_interpreter(const std::string& shebang) {
  std::vector<std::string> words;
  size_t at = 0;
  while (at < shebang.size()) {
    size_t start = shebang.find_first_not_of(" \t", at);
    if (start == std::string::npos) break;
    size_t end = shebang.find_first_of(" \t", start);
    words.push_back(shebang.substr(start, end == std::string::npos ? std::string::npos : end - start));
    at = end == std::string::npos ? shebang.size() : end;
  }
  if (words.empty()) return {};
  if (words[0].size() >= 4 && words[0].substr(words[0].size() - 4) == "/env" && words.size() > 1) {
    std::string found = find_in_path(words[1]);
    return found.empty() ? words[1] : found;
  }
  return words[0];
}

BinaryCheck check_binary(const std::string& path) {
  BinaryCheck check;
  InputFile file = read_regular_file(path);
  if (!file.ok) {
    check.detail = file.error;
    return check;
  }
  std::vector<char> data(file.data.begin(), file.data.end());
  file.data.clear();
  if (data.size() >= 2 && data[0] == '#' && data[1] == '!') {
    check.kind = BinaryKind::kScript;
    auto end = std::find(data.begin(), data.end(), '\n');
    check.detail = std::string(data.begin() + 2, end);
    return check;
  }
  if (data.size() < sizeof(Elf64_Ehdr) || std::memcmp(data.data(), ELFMAG, SELFMAG) != 0 ||
      data[EI_CLASS] != ELFCLASS64) {
    check.detail = "not a 64-bit ELF file";
    return check;
  }
  Elf64_Ehdr header;
  std::memcpy(&header, data.data(), sizeof header);
  bool has_interpreter = false;
  for (int i = 0; i < header.e_phnum; ++i) {
    size_t at = header.e_phoff + static_cast<size_t>(i) * header.e_phentsize;
    if (at + sizeof(Elf64_Phdr) > data.size()) break;
    Elf64_Phdr ph;
    std::memcpy(&ph, data.data() + at, sizeof ph);
    if (ph.p_type == PT_INTERP) has_interpreter = true;
  }
  if (contains(data, ".go.buildinfo") || contains(data, "Go build ID")) {
    check.kind = has_interpreter ? BinaryKind::kGoDynamic : BinaryKind::kGoStatic;
  } else {
    check.kind = has_interpreter ? BinaryKind::kDynamic : BinaryKind::kStatic;
  }
  // Secure-execution mode (AT_SECURE): the loader ignores LD_PRELOAD entries with a slash and loads the
  // others only from the system directories, and only if they are set-uid themselves.
  if (check.kind == BinaryKind::kDynamic) {
    if (file.mode & S_ISUID) {
      check.kind = BinaryKind::kSetUid;
    } else if (file.mode & S_ISGID) {
      check.kind = BinaryKind::kSetGid;
    } else if (getxattr(path.c_str(), "security.capability", nullptr, 0) > 0) {
      check.kind = BinaryKind::kCapabilities;
    }
  }
  return check;
}

ResolvedProgram resolve_program(const std::string& path) {
  ResolvedProgram resolved;
  resolved.path = path;
  for (int level = 0; level < 5; ++level) {
    resolved.chain.push_back(resolved.path);
    resolved.check = check_binary(resolved.path);
    if (resolved.check.kind != BinaryKind::kScript || level == 4) break;
    std::string interpreter = script_interpreter(resolved.check.detail);
    if (interpreter.empty()) break;
    resolved.path = interpreter;
  }
  return resolved;
}

std::string coverage_warning(const std::string& path) {
  ResolvedProgram resolved = resolve_program(path);
  BinaryKind kind = resolved.check.kind;
  if (kind == BinaryKind::kDynamic || kind == BinaryKind::kUnreadable || kind == BinaryKind::kScript)
    return {};
  const char* syscalls = getenv("APPENDGUARD_SYSCALLS");
  if (kind == BinaryKind::kGoDynamic && syscalls && std::strcmp(syscalls, "always") == 0) return {};
  std::string line = "appendguard run: warning: " + path;
  line += resolved.path != path ? " runs " + resolved.path + ", which is" : std::string(" is");
  line += std::string(" ") + describe(kind) + ": its writes are not guarded";
  return line;
}

const char* describe(BinaryKind kind) {
  switch (kind) {
    case BinaryKind::kDynamic:
      return "dynamically linked: covered (libc calls are interposed)";
    case BinaryKind::kStatic:
      return "statically linked: NOT covered (LD_PRELOAD has no effect on it)";
    case BinaryKind::kGoStatic:
      return "a statically linked Go program: NOT covered (LD_PRELOAD has no effect on it, whatever "
             "APPENDGUARD_SYSCALLS says)";
    case BinaryKind::kGoDynamic:
      return "a dynamically linked Go program: covered only with APPENDGUARD_SYSCALLS=always (its runtime "
             "makes its file I/O by system calls of its own, not through libc; auto and off: NOT covered)";
    case BinaryKind::kSetUid:
      return "dynamically linked but set-uid: NOT covered (for set-uid and set-gid programs the loader "
             "ignores LD_PRELOAD of a library outside the system directories)";
    case BinaryKind::kSetGid:
      return "dynamically linked but set-gid: NOT covered (for set-uid and set-gid programs the loader "
             "ignores LD_PRELOAD of a library outside the system directories)";
    case BinaryKind::kCapabilities:
      return "dynamically linked but has file capabilities: NOT covered (the loader runs it in secure "
             "mode and ignores LD_PRELOAD of a library outside the system directories)";
    case BinaryKind::kScript:
      return "a script: what matters is its interpreter";
    case BinaryKind::kUnreadable:
      return "could not be read";
  }
  return "";
}

}  // namespace appendguard
