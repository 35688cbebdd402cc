#include "core/config.h"

#include <cerrno>
#include <charconv>
#include <cstring>

#include "core/errno_names.h"
#include "core/variables.h"

namespace appendguard {
namespace {

struct ErrnoName {
  int value;
  const char* name;
};

constexpr ErrnoName kErrnoNames[] = {
    {EOPNOTSUPP, "EOPNOTSUPP"},
    {ENOTSUP, "ENOTSUP"},
    {EPERM, "EPERM"},
    {EACCES, "EACCES"},
    {EBADF, "EBADF"},
    {EINVAL, "EINVAL"},
    {EIO, "EIO"},
    {ENOSPC, "ENOSPC"},
    {EROFS, "EROFS"},
    {ENOSYS, "ENOSYS"},
    {ESPIPE, "ESPIPE"},
    {EFBIG, "EFBIG"},
    {EAGAIN, "EAGAIN"},
    {EWOULDBLOCK, "EWOULDBLOCK"},
    {EINTR, "EINTR"},
    {ENOENT, "ENOENT"},
    {EEXIST, "EEXIST"},
    {ENXIO, "ENXIO"},
    {EMFILE, "EMFILE"},
    {EDQUOT, "EDQUOT"},
    {ETXTBSY, "ETXTBSY"},
};

// Errnos that callers retry (glibc's stdio, Python's io, TEMP_FAILURE_RETRY, non-blocking loops): a
// refusal reported with one would be retried forever.
bool callers_retry(int err) {
  return err == EINTR || err == EAGAIN || err == EWOULDBLOCK;
}

bool parse_int(std::string_view text, long max, long& out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && out >= 0 && out <= max;
}

// One line: the variable, the value as given, and what would have been accepted.
std::string bad_value(const char* variable, std::string_view value, std::string_view detail) {
  std::string line = "appendguard: invalid ";
  line += variable;
  line += "='";
  line += value;
  line += "': ";
  line += detail;
  return line;
}

bool parse_mode(std::string_view v, Mode& mode) {
  if (v.empty() || v == "0" || v == "off") {
    mode = Mode::kOff;
  } else if (v == "1" || v == "on" || v == "enforce") {
    mode = Mode::kEnforce;
  } else if (v == "audit") {
    mode = Mode::kAudit;
  } else {
    return false;
  }
  return true;
}

bool parse_action(std::string_view v, Action& action) {
  if (v == "error") {
    action = Action::kError;
  } else if (v == "abort") {
    action = Action::kAbort;
  } else if (v == "warn") {
    action = Action::kWarn;
  } else {
    return false;
  }
  return true;
}

bool parse_bool(std::string_view v, bool& out) {
  if (v == "1" || v == "on" || v == "yes" || v == "true") {
    out = true;
  } else if (v == "0" || v == "off" || v == "no" || v == "false") {
    out = false;
  } else {
    return false;
  }
  return true;
}

}  // namespace

int errno_from_name(std::string_view name) {
  for (const auto& entry : kErrnoNames) {
    if (name == entry.name) return entry.value;
  }
  long number = 0;
  if (parse_int(name, 4095, number) && number > 0) return static_cast<int>(number);
  return 0;
}

const char* errno_name(int err) {
  for (const auto& entry : kErrnoNames) {
    if (entry.value == err) return entry.name;
  }
  const char* name = linux_errno_name(err);  // a static string, safe in reports
  return name ? name : "E?";
}

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::kOff:
      return "off";
    case Mode::kEnforce:
      return "enforce";
    case Mode::kAudit:
      return "audit";
  }
  return "?";
}

const char* action_name(Action action) {
  switch (action) {
    case Action::kError:
      return "error";
    case Action::kAbort:
      return "abort";
    case Action::kWarn:
      return "warn";
  }
  return "?";
}

ConfigResult parse_config(EnvLookup lookup, const char* const* environment) {
  ConfigResult result;
  Config& config = result.config;
  auto get = [&](const char* name) -> const char* { return lookup(name); };

  const char* mode = get("APPENDGUARD");
  if (mode && !parse_mode(mode, config.mode)) {
    result.error = bad_value("APPENDGUARD", mode, "accepted: unset, 0, off (inert); 1, on, enforce; audit");
    return result;
  }
  if (config.mode == Mode::kOff) {  // inert: the rest is not even read
    std::string present = mode ? std::string() : settings_present(environment);
    if (!present.empty()) {
      result.notices.push_back("appendguard: loaded but inert: APPENDGUARD is not set (not exported?), so " +
                               present +
                               " ignored; set APPENDGUARD=1 (enforce) or APPENDGUARD=audit to guard, or "
                               "APPENDGUARD=off to stay inert without this line");
    }
    return result;
  }
  if (std::string unknown = check_variable_names(environment); !unknown.empty()) {
    result.error = std::move(unknown);
    return result;
  }

  config.on_violation = config.mode == Mode::kAudit ? Action::kWarn : Action::kError;
  if (const char* v = get("APPENDGUARD_ON_VIOLATION")) {
    if (!parse_action(v, config.on_violation)) {
      result.error = bad_value("APPENDGUARD_ON_VIOLATION", v, "accepted: error, abort, warn");
      return result;
    }
  }

  if (config.mode == Mode::kAudit && config.on_violation == Action::kError) {
    result.error = bad_value("APPENDGUARD_ON_VIOLATION", "error",
                             "audit mode changes nothing, so it cannot refuse a call; accepted with "
                             "APPENDGUARD=audit: warn, abort");
    return result;
  }

  config.violation_errno = EOPNOTSUPP;
  if (const char* v = get("APPENDGUARD_ERRNO")) {
    constexpr const char* kAccepted =
        "accepted: an errno name such as EOPNOTSUPP, EPERM, EBADF, EINVAL, EIO, ENOSPC, EROFS, "
        "or a number from 1 to 4095, except EINTR (4) and EAGAIN/EWOULDBLOCK (11)";
    config.violation_errno = errno_from_name(v);
    if (config.violation_errno == 0) {
      result.error = bad_value("APPENDGUARD_ERRNO", v, kAccepted);
      return result;
    }
    if (callers_retry(config.violation_errno)) {
      result.error =
          bad_value("APPENDGUARD_ERRNO", v,
                    std::string(errno_name(config.violation_errno)) +
                        " is retried by callers, so a refused call would repeat forever; " + kAccepted);
      return result;
    }
  }

  const char* paths = get("APPENDGUARD_PATHS");
  std::string pattern_error = config.paths.compile(paths ? paths : "*.safetensors");
  if (!pattern_error.empty()) {
    result.error = bad_value("APPENDGUARD_PATHS", paths ? paths : "",
                             pattern_error +
                                 "; accepted: colon-separated glob patterns ('*', '?', '[...]', "
                                 "'**' across directories), e.g. '*.safetensors:/mnt/hdfs/**'");
    return result;
  }

  config.log_target = "stderr";
  if (const char* v = get("APPENDGUARD_LOG")) {
    if (*v == '\0') {
      result.error =
          bad_value("APPENDGUARD_LOG", v, "accepted: stderr or a file path (%p pid, %h host, %r rank)");
      return result;
    }
    config.log_target = v;
  }

  if (const char* v = get("APPENDGUARD_BACKTRACE")) {
    long frames = 0;
    if (!parse_int(v, 256, frames)) {
      result.error =
          bad_value("APPENDGUARD_BACKTRACE", v, "accepted: a whole number of frames from 0 (none) to 256");
      return result;
    }
    config.backtrace_frames = static_cast<int>(frames);
  }

  if (const char* v = get("APPENDGUARD_TRACE")) {
    if (!parse_bool(v, config.trace)) {
      result.error = bad_value("APPENDGUARD_TRACE", v, "accepted: 1, on, yes, true; 0, off, no, false");
      return result;
    }
  }
  if (const char* v = get("APPENDGUARD_REOPEN")) {
    std::string_view word = v;
    if (word == "append") {
      config.reopen = Reopen::kAppend;
    } else if (word == "rewrite") {
      config.reopen = Reopen::kRewrite;
    } else if (word == "hold") {
      config.reopen = Reopen::kHold;
    } else if (word == "auto") {
      config.reopen = Reopen::kAuto;
    } else {
      result.error = bad_value("APPENDGUARD_REOPEN", v, "accepted: auto, append, rewrite, hold");
      return result;
    }
  }
  if (const char* v = get("APPENDGUARD_HOLD_SECONDS")) {
    long seconds = 0;
    if (!parse_int(v, 86400, seconds)) {
      result.error = bad_value("APPENDGUARD_HOLD_SECONDS", v,
                               "accepted: a whole number of seconds from 0 (no limit) to 86400");
      return result;
    }
    config.hold_seconds = static_cast<unsigned>(seconds);
  }
  if (const char* v = get("APPENDGUARD_FS")) {
    std::string why = parse_mount_selection(v, config.mounts);
    if (!why.empty()) {
      result.error = bad_value("APPENDGUARD_FS", v,
                               why +
                                   "; accepted: known (the default: appendonlyfs, fuse_dfs, mountpoint-s3), "
                                   "fuse (every FUSE mount), none (by name only), or a comma-separated list "
                                   "of mount types, sources and absolute mount points to add");
      return result;
    }
  }
  if (const char* v = get("APPENDGUARD_PREALLOC")) {
    std::string_view word = v;
    if (word == "defer") {
      config.prealloc = Prealloc::kDefer;
    } else if (word == "refuse") {
      config.prealloc = Prealloc::kRefuse;
    } else {
      result.error = bad_value("APPENDGUARD_PREALLOC", v, "accepted: defer, refuse");
      return result;
    }
  }
  // Unset: only into a log file (on stderr it would mix with the program's own output).
  config.summary = config.log_target != "stderr";
  if (const char* v = get("APPENDGUARD_SUMMARY")) {
    if (!parse_bool(v, config.summary)) {
      result.error = bad_value("APPENDGUARD_SUMMARY", v, "accepted: 1, on, yes, true; 0, off, no, false");
      return result;
    }
  }
  if (const char* v = get("APPENDGUARD_FORMAT")) {
    std::string_view word = v;
    if (word == "text" || word == "json") {
      config.json = word == "json";
    } else {
      result.error = bad_value("APPENDGUARD_FORMAT", v, "accepted: text, json");
      return result;
    }
  }
  if (const char* v = get("APPENDGUARD_PYTHON_STACK")) {
    if (!parse_bool(v, config.python_stack)) {
      result.error =
          bad_value("APPENDGUARD_PYTHON_STACK", v, "accepted: 1, on, yes, true; 0, off, no, false");
      return result;
    }
  }
  return result;
}

}  // namespace appendguard
