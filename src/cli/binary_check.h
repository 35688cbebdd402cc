// What `appendguard doctor` tells about a program: whether symbol interposition can reach it.
#pragma once

#include <string>
#include <vector>

namespace appendguard {

enum class BinaryKind {
  kDynamic,
  kStatic,
  kGoStatic,   // LD_PRELOAD cannot load into it
  kGoDynamic,  // cgo-linked: the library loads, its runtime's own system calls need
               // APPENDGUARD_SYSCALLS=always
  kSetUid,
  kSetGid,
  kCapabilities,
  kScript,
  kUnreadable
};

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

// `command` itself when it has a '/', else the first executable regular file of that name in PATH; ""
// when none.
std::string find_in_path(const std::string& command);

// The program a "#!" line (without "#!") runs: its first word, or for "/usr/bin/env NAME" the NAME found
// in PATH.
std::string script_interpreter(const std::string& shebang);

// The program `path` finally runs: #! scripts are followed to their interpreter (up to 4 levels).
// `chain` gets each file on the way, `path` first.
struct ResolvedProgram {
  std::string path;
  BinaryCheck check;
  std::vector<std::string> chain;
};
ResolvedProgram resolve_program(const std::string& path);

// One line for `appendguard run` when the library cannot reach the program `path` (static, Go, set-id,
// file capabilities, directly or as a script's interpreter); "" when it can or `path` cannot be read. A
// dynamically linked Go program is reached with APPENDGUARD_SYSCALLS=always (read from the environment).
std::string coverage_warning(const std::string& path);

}  // namespace appendguard
