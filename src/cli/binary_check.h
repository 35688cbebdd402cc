// What `appendguard doctor` tells about a program: whether symbol interposition can reach it.
#pragma once

#include <string>

namespace appendguard {

enum class BinaryKind { kDynamic, kStatic, kGo, kSetUid, kSetGid, kCapabilities, kScript, kUnreadable };

struct BinaryCheck {
  BinaryKind kind = BinaryKind::kUnreadable;
  std::string detail;  // e.g. the interpreter of a script, or why it could not be read
};

// Looks at the ELF headers: no PT_INTERP means static (LD_PRELOAD does nothing); a Go build ID or
// .go.buildinfo section means Go, which makes system calls itself. "#!" files are scripts. A dynamic
// program that is set-uid, set-gid or has file capabilities runs in secure-execution mode, where LD_PRELOAD
// of our library (a path outside the system directories) is ignored. Only regular files are read.
BinaryCheck check_binary(const std::string& path);

const char* describe(BinaryKind kind);

}  // namespace appendguard
