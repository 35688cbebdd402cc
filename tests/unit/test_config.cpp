#include <catch2/catch.hpp>

#include <cerrno>
#include <map>
#include <string>

#include "core/config.h"
#include "core/variables.h"
#include "fake_environment.h"

using namespace appendguard;

namespace {

using testing::fake_env;
using testing::fake_environment;

ConfigResult parse(std::map<std::string, std::string> env) {
  fake_environment() = std::move(env);
  return parse_config(fake_env);
}

}  // namespace

TEST_CASE("mode words") {
  CHECK(parse({}).config.mode == Mode::kOff);
  // The boolean words of the other switches (APPENDGUARD_TRACE...), and the modes.
  for (const char* off : {"", "0", "off", "no", "false"}) {
    CHECK(parse({{"APPENDGUARD", off}}).config.mode == Mode::kOff);
    CHECK(mode_value_is_off(off));
  }
  for (const char* on : {"1", "on", "yes", "true", "enforce"}) {
    CHECK(parse({{"APPENDGUARD", on}}).config.mode == Mode::kEnforce);
    if (std::string(on) != "enforce")
      CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_TRACE", on}}).config.trace);
  }
  CHECK(parse({{"APPENDGUARD", "audit"}}).config.mode == Mode::kAudit);
  for (const char* bad : {"ON", "2", "enforce ", "y"}) {
    ConfigResult r = parse({{"APPENDGUARD", bad}});
    CHECK_FALSE(r.ok());
    CHECK(r.error.find(std::string("APPENDGUARD='") + bad + "'") != std::string::npos);
  }
}

TEST_CASE("inert mode reads nothing else, so a bad value elsewhere does not matter") {
  ConfigResult r = parse({{"APPENDGUARD", "0"}, {"APPENDGUARD_PATHS", "[bad"}});
  CHECK(r.ok());
}

TEST_CASE("defaults when enabled") {
  ConfigResult r = parse({{"APPENDGUARD", "1"}});
  REQUIRE(r.ok());
  CHECK(r.config.on_violation == Action::kError);
  CHECK(r.config.violation_errno == EOPNOTSUPP);
  CHECK(r.config.log_target == "stderr");
  CHECK(r.config.backtrace_frames == 32);
  CHECK_FALSE(r.config.trace);
  CHECK(r.config.paths.matches("/x/model.safetensors", "model.safetensors"));
  CHECK_FALSE(r.config.paths.matches("/x/model.bin", "model.bin"));
}

TEST_CASE("audit defaults to warn and refuses error") {
  CHECK(parse({{"APPENDGUARD", "audit"}}).config.on_violation == Action::kWarn);
  CHECK(parse({{"APPENDGUARD", "audit"}, {"APPENDGUARD_ON_VIOLATION", "abort"}}).config.on_violation ==
        Action::kAbort);
  CHECK_FALSE(parse({{"APPENDGUARD", "audit"}, {"APPENDGUARD_ON_VIOLATION", "error"}}).ok());
}

TEST_CASE("violation actions") {
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_ON_VIOLATION", "warn"}}).config.on_violation ==
        Action::kWarn);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_ON_VIOLATION", "abort"}}).config.on_violation ==
        Action::kAbort);
  ConfigResult r = parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_ON_VIOLATION", "deny"}});
  CHECK_FALSE(r.ok());
  CHECK(r.error == "appendguard: invalid APPENDGUARD_ON_VIOLATION='deny': accepted: error, abort, warn");
}

TEST_CASE("errno names and numbers") {
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_ERRNO", "EPERM"}}).config.violation_errno == EPERM);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_ERRNO", "EROFS"}}).config.violation_errno == EROFS);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_ERRNO", "5"}}).config.violation_errno == 5);
  for (const char* bad : {"", "eperm", "0", "-5", "4096", "EWHATEVER", "5x"}) {
    CHECK_FALSE(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_ERRNO", bad}}).ok());
  }
  CHECK(std::string(errno_name(EOPNOTSUPP)) == "EOPNOTSUPP");
  CHECK(errno_from_name("ENOSPC") == ENOSPC);
}

TEST_CASE("errnos that callers retry are refused (a refused write would repeat forever)") {
  // Issue 13: with APPENDGUARD_ERRNO=EINTR Python retried the refused write forever.
  for (const char* retried : {"EINTR", "EAGAIN", "EWOULDBLOCK", "4", "11"}) {
    ConfigResult r = parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_ERRNO", retried}});
    CHECK_FALSE(r.ok());
    CHECK(r.error.find("appendguard: invalid APPENDGUARD_ERRNO='" + std::string(retried) + "': ") == 0);
    CHECK(r.error.find("retried by callers") != std::string::npos);
    CHECK(r.error.find("accepted: an errno name such as EOPNOTSUPP") != std::string::npos);
    CHECK(r.error.find('\n') == std::string::npos);
  }
  CHECK(
      parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_ERRNO", "EINTR"}}).error ==
      "appendguard: invalid APPENDGUARD_ERRNO='EINTR': EINTR is retried by callers, so a refused call would "
      "repeat forever; accepted: an errno name such as EOPNOTSUPP, EPERM, EBADF, EINVAL, EIO, ENOSPC, "
      "EROFS, or a number from 1 to 4095, except EINTR (4) and EAGAIN/EWOULDBLOCK (11)");
  CHECK(std::string(errno_name(EAGAIN)) == "EAGAIN");  // reports still name them
  CHECK(std::string(errno_name(EINTR)) == "EINTR");
}

TEST_CASE("backtrace frames") {
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_BACKTRACE", "0"}}).config.backtrace_frames == 0);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_BACKTRACE", "256"}}).config.backtrace_frames == 256);
  for (const char* bad : {"-1", "257", "", "ten", "1.5"}) {
    CHECK_FALSE(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_BACKTRACE", bad}}).ok());
  }
}

TEST_CASE("paths, log, trace and python stack") {
  ConfigResult r = parse({{"APPENDGUARD", "1"},
                          {"APPENDGUARD_PATHS", "*.bin:/mnt/**"},
                          {"APPENDGUARD_LOG", "/tmp/ag-%p.log"},
                          {"APPENDGUARD_TRACE", "yes"},
                          {"APPENDGUARD_PYTHON_STACK", "off"}});
  REQUIRE(r.ok());
  CHECK(r.config.paths.size() == 2);
  CHECK(r.config.log_target == "/tmp/ag-%p.log");
  CHECK(r.config.trace);
  CHECK_FALSE(r.config.python_stack);
  for (const char* bad : {"", "[x", "a::b", ":a", "dir/x", "x\\"}) {
    ConfigResult e = parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_PATHS", bad}});
    CHECK_FALSE(e.ok());
    CHECK(e.error.rfind("appendguard: invalid APPENDGUARD_PATHS='", 0) == 0);
    CHECK(e.error.find("accepted") != std::string::npos);
  }
  CHECK_FALSE(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_LOG", ""}}).ok());
  CHECK_FALSE(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_TRACE", "maybe"}}).ok());
}

TEST_CASE("every error is one line") {
  ConfigResult r = parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_PATHS", "a/b"}});
  CHECK(r.error.find('\n') == std::string::npos);
}

TEST_CASE("reopen strategy") {
  CHECK(parse({{"APPENDGUARD", "1"}}).config.reopen == Reopen::kAuto);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_REOPEN", "auto"}}).config.reopen == Reopen::kAuto);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_REOPEN", "hold"}}).config.reopen == Reopen::kHold);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_REOPEN", "append"}}).config.reopen == Reopen::kAppend);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_REOPEN", "rewrite"}}).config.reopen == Reopen::kRewrite);
  ConfigResult r = parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_REOPEN", "copy"}});
  CHECK(r.error == "appendguard: invalid APPENDGUARD_REOPEN='copy': accepted: auto, append, rewrite, hold");
}

TEST_CASE("the raw-system-call layer and io_uring") {
  Config c = parse({{"APPENDGUARD", "1"}}).config;
  CHECK(c.syscalls == SyscallLayer::kAuto);
  CHECK(c.io_uring == IoUring::kRefuse);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_SYSCALLS", "off"}}).config.syscalls == SyscallLayer::kOff);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_SYSCALLS", "always"}}).config.syscalls ==
        SyscallLayer::kAlways);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_IO_URING", "allow"}}).config.io_uring == IoUring::kAllow);
  ConfigResult r = parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_SYSCALLS", "on"}});
  CHECK(r.error == "appendguard: invalid APPENDGUARD_SYSCALLS='on': accepted: auto, always, off");
  r = parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_IO_URING", "yes"}});
  CHECK(r.error == "appendguard: invalid APPENDGUARD_IO_URING='yes': accepted: refuse, allow");
}

TEST_CASE("preallocation and whole-mount guarding") {
  Config c = parse({{"APPENDGUARD", "1"}}).config;
  CHECK(c.prealloc == Prealloc::kDefer);
  CHECK(c.mounts.known);
  CHECK_FALSE(c.mounts.any_fuse);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_PREALLOC", "refuse"}}).config.prealloc ==
        Prealloc::kRefuse);
  ConfigResult r = parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_PREALLOC", "zero"}});
  CHECK(r.error == "appendguard: invalid APPENDGUARD_PREALLOC='zero': accepted: defer, refuse");
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_FS", "none"}}).config.mounts.none());
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_FS", "fuse"}}).config.mounts.any_fuse);
  r = parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_FS", "fuse rclone"}});
  CHECK(r.error.starts_with(
      "appendguard: invalid APPENDGUARD_FS='fuse rclone': an item with a space (items are "
      "separated by commas); accepted: known (the default"));
}

TEST_CASE("the spool of files created on stores without rename") {
  ConfigResult r = parse({{"APPENDGUARD", "1"}});
  CHECK(r.config.spool_dir.empty());
  CHECK_FALSE(r.config.spool_off);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_SPOOL", "/scratch/spool"}}).config.spool_dir ==
        "/scratch/spool");
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_SPOOL", "off"}}).config.spool_off);
  for (const char* bad : {"", "relative/dir", "none"}) {
    r = parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_SPOOL", bad}});
    CHECK(r.error == std::string("appendguard: invalid APPENDGUARD_SPOOL='") + bad +
                         "': accepted: an absolute directory, or off");
  }
}

TEST_CASE("the time limit of held sessions") {
  CHECK(parse({{"APPENDGUARD", "1"}}).config.hold_seconds == 60);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_HOLD_SECONDS", "0"}}).config.hold_seconds == 0);
  CHECK(parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_HOLD_SECONDS", "5"}}).config.hold_seconds == 5);
  for (const char* bad : {"-1", "1.5", "86401", "", "10s"}) {
    ConfigResult r = parse({{"APPENDGUARD", "1"}, {"APPENDGUARD_HOLD_SECONDS", bad}});
    CHECK(r.error == std::string("appendguard: invalid APPENDGUARD_HOLD_SECONDS='") + bad +
                         "': accepted: a whole number of seconds from 0 (no limit) to 86400");
  }
}
