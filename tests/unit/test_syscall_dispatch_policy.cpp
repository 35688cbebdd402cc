#include <linux/sched.h>
#include <signal.h>
#include <sys/syscall.h>

#include <cstring>

#include <catch2/catch.hpp>

#include "core/syscall_dispatch_policy.h"

using namespace appendguard;

namespace {
constexpr uint64_t bit(int sig) {
  return uint64_t{1} << (sig - 1);
}
}  // namespace

TEST_CASE("the calls of interest go to their hooks, every other one is performed unchanged") {
  CHECK(classify_raw_call(SYS_pwrite64) == RawCall::kPwrite64);
  CHECK(classify_raw_call(SYS_openat) == RawCall::kOpenat);
  CHECK(classify_raw_call(SYS_openat2) == RawCall::kOpenat2);
  CHECK(classify_raw_call(SYS_renameat) == RawCall::kRenameat);
  CHECK(classify_raw_call(SYS_renameat2) == RawCall::kRenameat2);
  CHECK(classify_raw_call(SYS_unlink) == RawCall::kUnlink);
  CHECK(classify_raw_call(SYS_unlinkat) == RawCall::kUnlinkat);
  CHECK(classify_raw_call(SYS_vfork) == RawCall::kFork);
  CHECK(classify_raw_call(SYS_clone3) == RawCall::kClone3);
  CHECK(classify_raw_call(SYS_io_uring_setup) == RawCall::kIoUringSetup);
  CHECK(classify_raw_call(SYS_io_setup) == RawCall::kIoUringSetup);
  CHECK(classify_raw_call(SYS_rt_sigprocmask) == RawCall::kSigprocmask);
  CHECK(classify_raw_call(SYS_futex) == RawCall::kPass);
  CHECK(classify_raw_call(SYS_mmap) == RawCall::kPass);
  CHECK(classify_raw_call(SYS_read) == RawCall::kPass);
  CHECK(classify_raw_call(-1) == RawCall::kPass);
  CHECK(classify_raw_call(100000) == RawCall::kPass);
}

TEST_CASE("a raw clone is performed as a fork unless it shares memory with a stack of its own") {
  CHECK(clone_way(SIGCHLD, 0) == CloneWay::kAsFork);
  CHECK(clone_way(SIGCHLD, 0x7000) == CloneWay::kAsFork);
  CHECK(clone_way(CLONE_VM | CLONE_VFORK | SIGCHLD, 0) == CloneWay::kVforkAsFork);
  CHECK(clone_way(CLONE_VM | CLONE_VFORK | SIGCHLD, 0x7000) == CloneWay::kRefused);
  CHECK(clone_way(CLONE_VM | CLONE_THREAD | CLONE_SIGHAND, 0x7000) == CloneWay::kRefused);
  CHECK(clone_flags_performed(CLONE_VM | CLONE_VFORK | SIGCHLD, CloneWay::kVforkAsFork) == SIGCHLD);
  CHECK(clone_flags_performed(CLONE_SETTLS | CLONE_CHILD_SETTID | SIGCHLD, CloneWay::kAsFork) ==
        (CLONE_CHILD_SETTID | SIGCHLD));
}

TEST_CASE("a trapped rt_sigprocmask is applied to the mask, never blocking SIGSYS") {
  uint64_t mask = bit(SIGINT);
  uint64_t every = ~uint64_t{0};
  REQUIRE(apply_sigprocmask(SIG_BLOCK, &every, mask));
  CHECK((mask & bit(SIGSYS)) == 0);
  CHECK((mask & bit(SIGKILL)) == 0);
  CHECK((mask & bit(SIGTERM)) != 0);
  uint64_t term = bit(SIGTERM);
  REQUIRE(apply_sigprocmask(SIG_UNBLOCK, &term, mask));
  CHECK((mask & bit(SIGTERM)) == 0);
  CHECK((mask & bit(SIGINT)) != 0);
  uint64_t only_sigsys = bit(SIGSYS) | bit(SIGUSR1);
  REQUIRE(apply_sigprocmask(SIG_SETMASK, &only_sigsys, mask));
  CHECK(mask == bit(SIGUSR1));
  CHECK_FALSE(apply_sigprocmask(42, &term, mask));
  CHECK(apply_sigprocmask(42, nullptr, mask));  // without a set the kernel reads no `how`
  CHECK(mask == bit(SIGUSR1));
  CHECK(without_sigsys(bit(SIGSYS) | bit(SIGINT)) == bit(SIGINT));
}

TEST_CASE("the program reads back the SIGSYS it asked to block, which the kernel never has") {
  const uint64_t with = bit(SIGSYS) | bit(SIGINT);
  const uint64_t without = bit(SIGINT);
  CHECK(sigsys_blocked_after(SIG_BLOCK, &with, false));
  CHECK(sigsys_blocked_after(SIG_BLOCK, &without, true));
  CHECK_FALSE(sigsys_blocked_after(SIG_BLOCK, &without, false));
  CHECK_FALSE(sigsys_blocked_after(SIG_UNBLOCK, &with, true));
  CHECK(sigsys_blocked_after(SIG_UNBLOCK, &without, true));
  CHECK(sigsys_blocked_after(SIG_SETMASK, &with, false));
  CHECK_FALSE(sigsys_blocked_after(SIG_SETMASK, &without, true));
  CHECK(sigsys_blocked_after(SIG_SETMASK, nullptr, true));  // a read: nothing changes
  CHECK(sigsys_blocked_after(42, &without, true));          // EINVAL: nothing changes
  CHECK(as_program_set(without, true) == with);
  CHECK(as_program_set(without, false) == without);
  CHECK(has_sigsys(with));
  CHECK_FALSE(has_sigsys(without));
  CHECK(classify_raw_call(SYS_rt_sigreturn) == RawCall::kSigreturn);
}

TEST_CASE("Go's build ID note is found among an executable's notes") {
  // A GNU build ID note (name "GNU", type 3, 4 bytes), then Go's (name "Go", type 4, 6 bytes).
  const unsigned char notes[] = {4, 0, 0,   0,   4, 0, 0,   0,   3,   0,   0,   0,   'G', 'N', 'U',
                                 0, 1, 2,   3,   4, 3, 0,   0,   0,   6,   0,   0,   0,   4,   0,
                                 0, 0, 'G', 'o', 0, 0, 'a', 'b', 'c', 'd', 'e', 'f', 0,   0};
  CHECK(notes_hold_go_build_id(notes, sizeof notes));
  CHECK_FALSE(notes_hold_go_build_id(notes, 20));  // the GNU note alone
  CHECK_FALSE(notes_hold_go_build_id(notes, 30));  // Go's cut short
  unsigned char bad[sizeof notes];
  memcpy(bad, notes, sizeof notes);
  bad[20] = 0xff;  // a name size past the end
  CHECK_FALSE(notes_hold_go_build_id(bad, sizeof bad));
}

TEST_CASE("parse_libc_version reads MAJOR.MINOR as sscanf(\"%u.%u\") did") {
  unsigned major = 0, minor = 0;
  REQUIRE(parse_libc_version("2.36", major, minor));
  REQUIRE((major == 2 && minor == 36));
  REQUIRE(parse_libc_version("2.17", major, minor));
  REQUIRE((major == 2 && minor == 17));
  REQUIRE(parse_libc_version("2.34.9000", major, minor));  // a development version
  REQUIRE((major == 2 && minor == 34));
  REQUIRE(parse_libc_version("10.3-rc1", major, minor));
  REQUIRE((major == 10 && minor == 3));
  REQUIRE_FALSE(parse_libc_version("", major, minor));
  REQUIRE_FALSE(parse_libc_version("2", major, minor));
  REQUIRE_FALSE(parse_libc_version("2.", major, minor));
  REQUIRE_FALSE(parse_libc_version("x2.36", major, minor));
  REQUIRE_FALSE(parse_libc_version("2-36", major, minor));
}

TEST_CASE("libc_version_at_least compares major, then minor, and refuses what it cannot read") {
  CHECK(libc_version_at_least("2.34", 2, 34));
  CHECK(libc_version_at_least("2.36", 2, 34));
  CHECK(libc_version_at_least("3.0", 2, 34));  // a later major with a smaller minor
  CHECK_FALSE(libc_version_at_least("2.33", 2, 34));
  CHECK_FALSE(libc_version_at_least("1.99", 2, 25));
  CHECK(libc_version_at_least("2.25", 2, 25));
  CHECK(libc_version_at_least("2.34.9000", 2, 34));
  CHECK_FALSE(libc_version_at_least("", 2, 17));
  CHECK_FALSE(libc_version_at_least("x2.36", 2, 17));
}
