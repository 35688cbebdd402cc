#include "cli/binary_check.h"

#include <elf.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cli/input_file.h"

namespace appendguard {
namespace {

bool contains(const std::vector<char>& data, const char* needle) {
  return std::search(data.begin(), data.end(), needle, needle + std::strlen(needle)) != data.end();
}

}  // namespace

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
    check.kind = BinaryKind::kGo;
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

const char* describe(BinaryKind kind) {
  switch (kind) {
    case BinaryKind::kDynamic:
      return "dynamically linked: covered (libc calls are interposed)";
    case BinaryKind::kStatic:
      return "statically linked: NOT covered (LD_PRELOAD has no effect on it)";
    case BinaryKind::kGo:
      return "a Go program: NOT covered (Go makes system calls itself, not through libc)";
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
