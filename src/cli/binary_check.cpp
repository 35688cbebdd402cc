#include "cli/binary_check.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

namespace appendguard {
namespace {

bool contains(const std::vector<char>& data, const char* needle) {
  return std::search(data.begin(), data.end(), needle, needle + std::strlen(needle)) != data.end();
}

}  // namespace

BinaryCheck check_binary(const std::string& path) {
  BinaryCheck check;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    check.detail = "cannot open " + path;
    return check;
  }
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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
    case BinaryKind::kScript:
      return "a script: what matters is its interpreter";
    case BinaryKind::kUnreadable:
      return "could not be read";
  }
  return "";
}

}  // namespace appendguard
