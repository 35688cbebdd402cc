#include "core/syscall_dispatch_policy.h"

#include <linux/sched.h>
#include <signal.h>
#include <sys/syscall.h>

#include <array>
#include <cstring>

namespace appendguard {
namespace {

constexpr size_t kTableSize = 512;

constexpr std::array<RawCall, kTableSize> make_table() {
  std::array<RawCall, kTableSize> t{};  // kPass
  t[SYS_open] = RawCall::kOpen;
  t[SYS_openat] = RawCall::kOpenat;
  t[SYS_openat2] = RawCall::kOpenat2;
  t[SYS_creat] = RawCall::kCreat;
  t[SYS_write] = RawCall::kWrite;
  t[SYS_pwrite64] = RawCall::kPwrite64;
  t[SYS_writev] = RawCall::kWritev;
  t[SYS_pwritev] = RawCall::kPwritev;
  t[SYS_pwritev2] = RawCall::kPwritev2;
  t[SYS_sendfile] = RawCall::kSendfile;
  t[SYS_copy_file_range] = RawCall::kCopyFileRange;
  t[SYS_splice] = RawCall::kSplice;
  t[SYS_lseek] = RawCall::kLseek;
  t[SYS_ftruncate] = RawCall::kFtruncate;
  t[SYS_truncate] = RawCall::kTruncate;
  t[SYS_fallocate] = RawCall::kFallocate;
  t[SYS_close] = RawCall::kClose;
  t[SYS_close_range] = RawCall::kCloseRange;
  t[SYS_dup] = RawCall::kDup;
  t[SYS_dup2] = RawCall::kDup2;
  t[SYS_dup3] = RawCall::kDup3;
  t[SYS_fcntl] = RawCall::kFcntl;
  t[SYS_rename] = RawCall::kRename;
  t[SYS_renameat] = RawCall::kRenameat;
  t[SYS_renameat2] = RawCall::kRenameat2;
  t[SYS_unlink] = RawCall::kUnlink;
  t[SYS_unlinkat] = RawCall::kUnlinkat;
  t[SYS_fork] = RawCall::kFork;
  t[SYS_vfork] = RawCall::kFork;
  t[SYS_clone] = RawCall::kClone;
  t[SYS_clone3] = RawCall::kClone3;
  t[SYS_execve] = RawCall::kExecve;
  t[SYS_execveat] = RawCall::kExecveat;
  t[SYS_io_uring_setup] = RawCall::kIoUringSetup;
  t[SYS_io_setup] = RawCall::kIoUringSetup;
  t[SYS_rt_sigprocmask] = RawCall::kSigprocmask;
  t[SYS_rt_sigaction] = RawCall::kSigaction;
  t[SYS_rt_sigreturn] = RawCall::kSigreturn;
  t[SYS_sigaltstack] = RawCall::kSigaltstack;
  return t;
}

constexpr std::array<RawCall, kTableSize> kTable = make_table();
constexpr uint64_t kSigsysBit = uint64_t{1} << (SIGSYS - 1);

}  // namespace

RawCall classify_raw_call(long number) {
  if (static_cast<unsigned long>(number) >= kTableSize) return RawCall::kPass;
  return kTable[static_cast<size_t>(number)];
}

CloneWay clone_way(uint64_t flags, uint64_t stack) {
  if (!(flags & CLONE_VM)) return CloneWay::kAsFork;
  if ((flags & CLONE_VFORK) && stack == 0 && !(flags & (CLONE_THREAD | CLONE_SETTLS)))
    return CloneWay::kVforkAsFork;
  return CloneWay::kRefused;
}

uint64_t clone_flags_performed(uint64_t flags, CloneWay way) {
  flags &= ~static_cast<uint64_t>(CLONE_SETTLS);
  if (way == CloneWay::kVforkAsFork) flags &= ~static_cast<uint64_t>(CLONE_VM | CLONE_VFORK | CLONE_SIGHAND);
  return flags;
}

uint64_t without_sigsys(uint64_t mask) {
  return mask & ~kSigsysBit;
}

bool has_sigsys(uint64_t mask) {
  return (mask & kSigsysBit) != 0;
}

bool sigsys_blocked_after(int how, const uint64_t* set, bool before) {
  if (!set) return before;
  switch (how) {
    case SIG_BLOCK:
      return before || has_sigsys(*set);
    case SIG_UNBLOCK:
      return before && !has_sigsys(*set);
    case SIG_SETMASK:
      return has_sigsys(*set);
    default:
      return before;
  }
}

uint64_t as_program_set(uint64_t mask, bool sigsys_asked) {
  return sigsys_asked ? mask | kSigsysBit : mask;
}

bool apply_sigprocmask(int how, const uint64_t* set, uint64_t& mask) {
  if (!set) return true;  // the kernel reads `how` only with a set
  switch (how) {
    case SIG_BLOCK:
      mask |= *set;
      break;
    case SIG_UNBLOCK:
      mask &= ~*set;
      break;
    case SIG_SETMASK:
      mask = *set;
      break;
    default:
      return false;
  }
  // SIGKILL and SIGSTOP cannot be blocked; neither can SIGSYS here.
  mask &= ~((uint64_t{1} << (SIGKILL - 1)) | (uint64_t{1} << (SIGSTOP - 1)) | kSigsysBit);
  return true;
}

bool notes_hold_go_build_id(const unsigned char* notes, size_t size) {
  constexpr uint32_t kGoBuildIdType = 4;
  auto word = [&](size_t at) {
    uint32_t value;
    memcpy(&value, notes + at, sizeof value);
    return value;
  };
  auto padded = [](size_t n) { return (n + 3) & ~size_t{3}; };
  for (size_t at = 0; size - at >= 12 && at < size;) {
    const size_t name_size = word(at), desc_size = word(at + 4);
    const uint32_t type = word(at + 8);
    const size_t name_at = at + 12;
    if (name_size > size - name_at || padded(name_size) > size - name_at) return false;
    const size_t desc_at = name_at + padded(name_size);
    if (desc_size > size - desc_at) return false;
    // The Go linker writes the name "Go" with a name size of 4 (its padding counted).
    if (type == kGoBuildIdType && (name_size == 3 || name_size == 4) && memcmp(notes + name_at, "Go", 3) == 0)
      return true;
    at = desc_at + padded(desc_size);
  }
  return false;
}

bool parse_libc_version(const char* text, unsigned& major, unsigned& minor) {
  auto number = [&](unsigned& out) {
    if (*text < '0' || *text > '9') return false;
    out = 0;
    for (; *text >= '0' && *text <= '9'; ++text) out = out * 10 + static_cast<unsigned>(*text - '0');
    return true;
  };
  if (!number(major) || *text++ != '.') return false;
  return number(minor);
}

bool libc_version_at_least(const char* text, unsigned major, unsigned minor) {
  unsigned have_major = 0, have_minor = 0;
  if (!parse_libc_version(text, have_major, have_minor)) return false;
  return have_major > major || (have_major == major && have_minor >= minor);
}

}  // namespace appendguard
