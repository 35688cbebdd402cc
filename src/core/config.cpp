#include "core/config.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <span>

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
  const std::span<const Variable> variables = known_variables();
  // Parses one row's value, if set; false, with the error line set, when the value is refused.
  auto parse_row = [&](const Variable& row) {
    const char* value = lookup(row.name);
    if (!value) return true;
    std::string detail = row.parse(value, row, config);
    if (detail.empty()) return true;
    result.error = bad_value(row.name, value, detail);
    return false;
  };

  const Variable& mode = variables.front();  // APPENDGUARD, read first: inert reads nothing else
  const char* mode_value = lookup(mode.name);
  if (!parse_row(mode)) return result;
  if (config.mode == Mode::kOff) {  // inert: the rest is not even read, and nothing is allocated
    std::string present = mode_value ? std::string() : settings_present(environment);
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

  // Defaults that depend on the mode; the others are Config's own.
  config.on_violation = config.mode == Mode::kAudit ? Action::kWarn : Action::kError;
  config.violation_errno = EOPNOTSUPP;
  config.log_target = "stderr";
  for (const Variable& row : variables.subspan(1)) {
    if (row.kind != VariableKind::kSetting || !row.parse) continue;
    if (!parse_row(row)) return result;
  }
  if (!lookup("APPENDGUARD_PATHS")) config.paths.compile("*.safetensors");
  // Unset: only into a log file (on stderr it would mix with the program's own output).
  if (!lookup("APPENDGUARD_SUMMARY")) config.summary = config.log_target != "stderr";
  return result;
}

const char* reopen_choice_name(ReopenChoice choice) {
  switch (choice) {
    case ReopenChoice::kHold:
      return "hold";
    case ReopenChoice::kRewrite:
      return "rewrite";
    case ReopenChoice::kAppend:
      break;
  }
  return "append";
}

const char* reopen_name(Reopen reopen) {
  switch (reopen) {
    case Reopen::kAuto:
      return "auto";
    case Reopen::kRewrite:
      return "rewrite";
    case Reopen::kHold:
      return "hold";
    case Reopen::kAppend:
      break;
  }
  return "append";
}

}  // namespace appendguard
