#include "core/variables.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

#include "core/config.h"

namespace appendguard {

namespace {

constexpr const char* kBool = "1, on, yes, true; 0, off, no, false";

bool is_true_word(std::string_view v) {
  return v == "1" || v == "on" || v == "yes" || v == "true";
}

bool is_false_word(std::string_view v) {
  return v == "0" || v == "off" || v == "no" || v == "false";
}

}  // namespace

// APPENDGUARD takes the boolean words of the other switches (kBool) besides its modes.
bool mode_value_is_off(std::string_view v) {
  return v.empty() || is_false_word(v);
}

namespace {

// ---- Each setting's parser (the row's `parse`); `config` holds the rows above it already parsed ----

bool parse_int(std::string_view text, long max, long& out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && out >= 0 && out <= max;
}

bool parse_bool(std::string_view v, bool& out) {
  if (is_true_word(v)) {
    out = true;
  } else if (is_false_word(v)) {
    out = false;
  } else {
    return false;
  }
  return true;
}

// One of `words`, as the matching value of `values`.
template <typename T, size_t N>
std::string parse_word(std::string_view value, const Variable& self, const char* const (&words)[N],
                       const T (&values)[N], T& out) {
  for (size_t i = 0; i < N; ++i) {
    if (value == words[i]) {
      out = values[i];
      return {};
    }
  }
  return rejected(self);
}

std::string parse_mode(std::string_view v, const Variable& self, Config& config) {
  if (mode_value_is_off(v)) {
    config.mode = Mode::kOff;
  } else if (is_true_word(v) || v == "enforce") {
    config.mode = Mode::kEnforce;
  } else if (v == "audit") {
    config.mode = Mode::kAudit;
  } else {
    return rejected(self);
  }
  return {};
}

std::string parse_paths(std::string_view v, const Variable& self, Config& config) {
  std::string why = config.paths.compile(v);
  return why.empty() ? why : rejected(self, why);
}

std::string parse_on_violation(std::string_view v, const Variable& self, Config& config) {
  static constexpr const char* kWords[] = {"error", "abort", "warn"};
  static constexpr Action kActions[] = {Action::kError, Action::kAbort, Action::kWarn};
  std::string error = parse_word(v, self, kWords, kActions, config.on_violation);
  if (error.empty() && config.mode == Mode::kAudit && config.on_violation == Action::kError) {
    return "audit mode changes nothing, so it cannot refuse a call; accepted with APPENDGUARD=audit: warn, "
           "abort";
  }
  return error;
}

// Errnos that callers retry (glibc's stdio, Python's io, TEMP_FAILURE_RETRY, non-blocking loops): a
// refusal reported with one would be retried forever.
bool callers_retry(int err) {
  return err == EINTR || err == EAGAIN || err == EWOULDBLOCK;
}

std::string parse_errno(std::string_view v, const Variable& self, Config& config) {
  config.violation_errno = errno_from_name(v);
  if (config.violation_errno == 0) return rejected(self);
  if (callers_retry(config.violation_errno)) {
    return rejected(self, std::string(errno_name(config.violation_errno)) +
                              " is retried by callers, so a refused call would repeat forever");
  }
  return {};
}

std::string parse_log(std::string_view v, const Variable& self, Config& config) {
  if (v.empty()) return rejected(self);
  config.log_target = v;
  return {};
}

std::string parse_backtrace(std::string_view v, const Variable& self, Config& config) {
  long frames = 0;
  if (!parse_int(v, 256, frames)) return rejected(self);
  config.backtrace_frames = static_cast<int>(frames);
  return {};
}

template <bool Config::*Member>
std::string parse_switch(std::string_view v, const Variable& self, Config& config) {
  return parse_bool(v, config.*Member) ? std::string() : rejected(self);
}

std::string parse_reopen(std::string_view v, const Variable& self, Config& config) {
  static constexpr const char* kWords[] = {"auto", "append", "rewrite", "hold"};
  static constexpr Reopen kValues[] = {Reopen::kAuto, Reopen::kAppend, Reopen::kRewrite, Reopen::kHold};
  return parse_word(v, self, kWords, kValues, config.reopen);
}

std::string parse_hold_seconds(std::string_view v, const Variable& self, Config& config) {
  long seconds = 0;
  if (!parse_int(v, 86400, seconds)) return rejected(self);
  config.hold_seconds = static_cast<unsigned>(seconds);
  return {};
}

std::string parse_fs(std::string_view v, const Variable& self, Config& config) {
  std::string why = parse_mount_selection(v, config.mounts);
  return why.empty() ? why : rejected(self, why);
}

std::string parse_prealloc(std::string_view v, const Variable& self, Config& config) {
  static constexpr const char* kWords[] = {"defer", "refuse"};
  static constexpr Prealloc kValues[] = {Prealloc::kDefer, Prealloc::kRefuse};
  return parse_word(v, self, kWords, kValues, config.prealloc);
}

std::string parse_syscalls(std::string_view v, const Variable& self, Config& config) {
  static constexpr const char* kWords[] = {"auto", "always", "off"};
  static constexpr SyscallLayer kValues[] = {SyscallLayer::kAuto, SyscallLayer::kAlways, SyscallLayer::kOff};
  return parse_word(v, self, kWords, kValues, config.syscalls);
}

std::string parse_io_uring(std::string_view v, const Variable& self, Config& config) {
  static constexpr const char* kWords[] = {"refuse", "allow"};
  static constexpr IoUring kValues[] = {IoUring::kRefuse, IoUring::kAllow};
  return parse_word(v, self, kWords, kValues, config.io_uring);
}

std::string parse_spool(std::string_view v, const Variable& self, Config& config) {
  if (v == "off") {
    config.spool_off = true;
    return {};
  }
  if (v.empty() || v[0] != '/') return rejected(self);
  config.spool_dir = std::string(v);
  return {};
}

std::string parse_format(std::string_view v, const Variable& self, Config& config) {
  static constexpr const char* kWords[] = {"text", "json"};
  static constexpr bool kValues[] = {false, true};
  return parse_word(v, self, kWords, kValues, config.json);
}

// ---- The launcher's options ----

constexpr LaunchOption kModeOptions[] = {
    {.name = "--enforce",
     .sets = "enforce",
     .help = "rewrite read-write opens into appends, refuse writes not at the end (default)"},
    {.name = "--audit",
     .sets = "audit",
     .help = "change nothing; report every operation an append-only mount would refuse"},
};
constexpr LaunchOption kPathsOption[] = {
    {.name = "--paths",
     .argument = "P",
     .help = "colon-separated globs of guarded files (default *.safetensors)"}};
constexpr LaunchOption kOnViolationOption[] = {
    {.name = "--on-violation", .argument = "A", .help = "error (default), abort or warn"}};
constexpr LaunchOption kErrnoOption[] = {
    {.name = "--errno", .argument = "E", .help = "errno of a refused call (default EOPNOTSUPP)"}};
constexpr LaunchOption kLogOption[] = {
    {.name = "--log", .argument = "L", .help = "stderr (default) or a file; %p pid, %h host, %r rank"}};
constexpr LaunchOption kBacktraceOption[] = {
    {.name = "--backtrace", .argument = "N", .help = "native frames per report (default 32, 0 for none)"}};
constexpr LaunchOption kTraceOption[] = {
    {.name = "--trace", .sets = "1", .help = "also log every operation on guarded files"}};
constexpr LaunchOption kNoPythonStackOption[] = {
    {.name = "--no-python-stack", .sets = "0", .help = "leave the Python stack out of reports"}};
constexpr LaunchOption kReopenOption[] = {
    {.name = "--reopen",
     .argument = "R",
     .help = "auto (default: by the store), append, rewrite (for stores that cannot append) or hold"}};

// ---- The table ----

constexpr Variable kVariables[] = {
    {.name = "APPENDGUARD",
     .kind = VariableKind::kSetting,
     .accepted = "unset, empty, 0, off, no, false (inert); 1, on, yes, true, enforce; audit",
     .default_value = "inert",
     .help = "inert: every hook passes through; enforce: rewrite and refuse; audit: change nothing, report",
     .parse = parse_mode,
     .options = kModeOptions},
    {.name = "APPENDGUARD_PATHS",
     .kind = VariableKind::kSetting,
     .accepted = "colon-separated glob patterns ('*', '?', '[...]', '**' across directories), e.g. "
                 "'*.safetensors:/mnt/hdfs/**'",
     .default_value = "*.safetensors",
     .help = "which files are guarded (a pattern with '/' matches the absolute path)",
     .parse = parse_paths,
     .options = kPathsOption},
    {.name = "APPENDGUARD_ON_VIOLATION",
     .kind = VariableKind::kSetting,
     .accepted = "error, abort, warn",
     .default_value = "error (warn in audit)",
     .help = "what happens to a call that breaks the rule",
     .parse = parse_on_violation,
     .options = kOnViolationOption},
    {.name = "APPENDGUARD_ERRNO",
     .kind = VariableKind::kSetting,
     .accepted =
         "an errno name such as EOPNOTSUPP, EPERM, EBADF, EINVAL, EIO, ENOSPC, EROFS, or a number from 1 "
         "to 4095, except EINTR (4) and EAGAIN/EWOULDBLOCK (11)",
     .default_value = "EOPNOTSUPP",
     .help = "the errno of a refused call",
     .parse = parse_errno,
     .options = kErrnoOption},
    {.name = "APPENDGUARD_LOG",
     .kind = VariableKind::kSetting,
     .accepted = "stderr or a file path (%p pid, %h host, %r rank)",
     .default_value = "stderr",
     .help = "where reports, trace lines and summaries go",
     .parse = parse_log,
     .options = kLogOption},
    {.name = "APPENDGUARD_BACKTRACE",
     .kind = VariableKind::kSetting,
     .accepted = "a whole number of frames from 0 (none) to 256",
     .default_value = "32",
     .help = "native frames per report (0 for none)",
     .parse = parse_backtrace,
     .options = kBacktraceOption},
    {.name = "APPENDGUARD_TRACE",
     .kind = VariableKind::kSetting,
     .accepted = kBool,
     .default_value = "off",
     .help = "one line per operation on a guarded file",
     .parse = parse_switch<&Config::trace>,
     .options = kTraceOption},
    {.name = "APPENDGUARD_PYTHON_STACK",
     .kind = VariableKind::kSetting,
     .accepted = kBool,
     .default_value = "on",
     .help = "add the Python stack to reports",
     .parse = parse_switch<&Config::python_stack>,
     .options = kNoPythonStackOption},
    {.name = "APPENDGUARD_REOPEN",
     .kind = VariableKind::kSetting,
     .accepted = "auto, append, rewrite, hold",
     .default_value = "auto",
     .help = "how enforce mode reopens an existing file for writing (auto: by the store)",
     .parse = parse_reopen,
     .options = kReopenOption},
    {.name = "APPENDGUARD_HOLD_SECONDS",
     .kind = VariableKind::kSetting,
     .accepted = "a whole number of seconds from 0 (no limit) to 86400",
     .default_value = "60",
     .help = "a held write session is committed after this many seconds without a reopen",
     .parse = parse_hold_seconds},
    {.name = "APPENDGUARD_FS",
     .kind = VariableKind::kSetting,
     .accepted = "known (the default: appendonlyfs, fuse_dfs, mountpoint-s3, rclone, gcsfuse), fuse (every "
                 "FUSE mount), none (by name only), or a comma-separated list of mount types, sources, "
                 "absolute mount points and MOUNT_POINT=STORE (a store of docs/stores.md's table, e.g. "
                 "/mnt/vol=databricks-volumes) to add",
     .default_value = "known",
     .help = "the mounts on which every file opened for writing is guarded",
     .parse = parse_fs},
    {.name = "APPENDGUARD_PREALLOC",
     .kind = VariableKind::kSetting,
     .accepted = "defer, refuse",
     .default_value = "defer",
     .help = "what enforce mode does with a call that only grows a guarded file",
     .parse = parse_prealloc},
    {.name = "APPENDGUARD_SYSCALLS",
     .kind = VariableKind::kSetting,
     .accepted = "auto, always, off",
     .default_value = "auto",
     .help = "system calls made outside libc (raw syscall instructions): auto traps them in the threads "
             "that open or create guarded files, while one is open, always in every thread from start-up, "
             "off never (Syscall User Dispatch, Linux 5.11+)",
     .parse = parse_syscalls},
    {.name = "APPENDGUARD_IO_URING",
     .kind = VariableKind::kSetting,
     .accepted = "refuse, allow",
     .default_value = "refuse",
     .help = "a raw io_uring_setup or io_setup in a process that writes guarded files: refused with ENOSYS "
             "(the program falls back to plain writes) or allowed (its writes are not seen); one line",
     .parse = parse_io_uring},
    {.name = "APPENDGUARD_SPOOL",
     .kind = VariableKind::kSetting,
     .accepted = "an absolute directory, or off",
     .default_value = "$TMPDIR, else /tmp",
     .help = "where a file created with O_EXCL on a store without rename (mountpoint-s3, Databricks "
             "volumes) is written until its rename uploads it once under the final name; off: written on "
             "the store and copied at the rename",
     .parse = parse_spool},
    // After APPENDGUARD_LOG: unset, its default depends on the log (parse_config).
    {.name = "APPENDGUARD_SUMMARY",
     .kind = VariableKind::kSetting,
     .accepted = kBool,
     .default_value = "on with a log file, off on stderr",
     .help = "one summary line at exit from a process that touched guarded files",
     .parse = parse_switch<&Config::summary>},
    {.name = "APPENDGUARD_FORMAT",
     .kind = VariableKind::kSetting,
     .accepted = "text, json",
     .default_value = "text",
     .help = "json: every report, trace line, notice and summary is one JSON object per line",
     .parse = parse_format},
    {"APPENDGUARD_CARRIED_FDS", VariableKind::kInternal, "set by the library", "",
     "guarded descriptors carried across exec; read and removed at start-up"},
    {"APPENDGUARD_LIBRARY", VariableKind::kTooling, "a path", "", "the library the launcher preloads"},
    {"APPENDGUARD_LIB", VariableKind::kTooling, "a path", "", "tests: the library under test"},
    {"APPENDGUARD_TEST_BIN", VariableKind::kTooling, "a directory", "", "tests: the test programs"},
    {"APPENDGUARD_TEST_PYTHON", VariableKind::kTooling, "a path", "", "tests: the Python of child processes"},
    {"APPENDGUARD_TEST_SANITIZER_RUNTIME", VariableKind::kTooling, "a path", "",
     "tests: the sanitizer runtime preloaded first"},
    {"APPENDGUARD_E2E_TMP", VariableKind::kTooling, "a directory", "",
     "tests: scratch space of the e2e tests"},
    {"APPENDGUARD_E2E_BIN", VariableKind::kTooling, "a directory", "", "tests: the e2e programs"},
    {"APPENDGUARD_LAUNCHER", VariableKind::kTooling, "a path", "", "tests: the launcher under test"},
    {"APPENDGUARD_README", VariableKind::kTooling, "a path", "", "tests: the README whose commands are run"},
    {"APPENDGUARD_CLIENT_PYTHON", VariableKind::kTooling, "a path", "", "build: the Python of real clients"},
    {"APPENDGUARD_REQUIRE_FUSE", VariableKind::kTooling, "1", "", "tests: fail instead of skip without FUSE"},
    {"APPENDGUARD_REQUIRE_REAL_CLIENTS", VariableKind::kTooling, "1", "",
     "tests: fail instead of skip without torch"},
    {"APPENDGUARD_VENV", VariableKind::kTooling, "a directory", "", "scripts: the real clients' venv"},
    {"APPENDGUARD_BUILD_DIR", VariableKind::kTooling, "a directory", "", "scripts: the build directory"},
    {"APPENDGUARD_BUILD", VariableKind::kTooling, "a directory", "",
     "scripts: the build directory (internal)"},
    {"APPENDGUARD_REPO", VariableKind::kTooling, "a directory", "", "scripts: the source tree (internal)"},
    {"APPENDGUARD_SANITIZERS", VariableKind::kTooling, "0", "", "scripts/test: skip the sanitizer builds"},
    {"APPENDGUARD_FUZZ", VariableKind::kTooling, "0", "", "scripts/test: skip the fuzzers"},
    {"APPENDGUARD_TSAN", VariableKind::kTooling, "1", "", "scripts/test: add the TSan build"},
};

constexpr std::string_view kPrefix = "APPENDGUARD";

std::string_view name_of(const char* entry) {
  const char* eq = std::strchr(entry, '=');
  return eq ? std::string_view(entry, static_cast<size_t>(eq - entry)) : std::string_view(entry);
}

}  // namespace

std::string rejected(const Variable& self, std::string_view why) {
  std::string detail(why);
  if (!detail.empty()) detail += "; ";
  detail += "accepted: ";
  detail += self.accepted;
  return detail;
}

std::span<const Variable> known_variables() {
  return kVariables;
}

const Variable* find_variable(std::string_view name) {
  for (const Variable& v : kVariables) {
    if (name == v.name) return &v;
  }
  return nullptr;
}

bool is_our_prefix(std::string_view name) {
  return name.substr(0, kPrefix.size()) == kPrefix;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

const Variable& closest_setting(std::string_view name) {
  const Variable* best = &kVariables[0];
  size_t best_distance = static_cast<size_t>(-1);
  for (const Variable& v : kVariables) {
    if (v.kind != VariableKind::kSetting) continue;
    size_t d = edit_distance(name, v.name);
    if (d < best_distance) {
      best = &v;
      best_distance = d;
    }
  }
  return *best;
}

namespace {

// A value as an error line shows it: between quotes, control bytes as \xHH, cut after 80 bytes.
void add_shown_value(std::string& line, std::string_view value) {
  constexpr size_t kShown = 80;
  static constexpr char kHex[] = "0123456789abcdef";
  line += '\'';
  for (size_t i = 0; i < value.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c == 0x7f) {
      line += "\\x";
      line += kHex[c >> 4];
      line += kHex[c & 0xf];
    } else {
      line += static_cast<char>(c);
    }
  }
  if (value.size() > kShown) line += "...";
  line += '\'';
}

// The word of a setting's accepted values that `value` looks like a misspelling of (one edit, two for
// words of six letters or more), e.g. "enforcee" -> APPENDGUARD's "enforce"; only words of letters, so
// that "1" or "0" point at no switch in particular.
std::string_view near_accepted_word(const Variable& v, std::string_view value) {
  std::string_view accepted = v.accepted;
  size_t i = 0;
  while (i < accepted.size()) {
    size_t start = i;
    while (i < accepted.size() && accepted[i] >= 'a' && accepted[i] <= 'z') ++i;
    std::string_view word = accepted.substr(start, i - start);
    if (word.size() >= 3 && edit_distance(value, word) <= (word.size() >= 6 ? 2u : 1u)) return word;
    if (i == start) ++i;
  }
  return {};
}

// Near enough to be a typo of the name: two edits.
constexpr size_t kNearName = 2;

}  // namespace

std::string suggest_setting(std::string_view name, std::string_view value) {
  const Variable& by_name = closest_setting(name);
  if (edit_distance(name, by_name.name) <= kNearName) return std::string(by_name.name);
  const Variable* by_value = nullptr;
  std::string_view word;
  for (const Variable& v : kVariables) {
    if (v.kind != VariableKind::kSetting) continue;
    std::string_view near = near_accepted_word(v, value);
    if (near.empty()) continue;
    if (!by_value || edit_distance(name, v.name) < edit_distance(name, by_value->name)) {
      by_value = &v;
      word = near;
    }
  }
  if (by_value) return std::string(by_value->name) + "=" + std::string(word);
  return {};
}

std::string check_variable_names(const char* const* environment) {
  if (!environment) return {};
  for (const char* const* e = environment; *e; ++e) {
    std::string_view name = name_of(*e);
    if (!is_our_prefix(name) || find_variable(name)) continue;
    std::string_view value = name.size() < std::strlen(*e) ? std::string_view(*e + name.size() + 1) : "";
    std::string line = "appendguard: unknown variable ";
    line += name;
    line += '=';
    add_shown_value(line, value);
    if (std::string suggestion = suggest_setting(name, value); !suggestion.empty()) {
      line += ": did you mean ";
      line += suggestion;
      line += "? (";
    } else {
      line += ": no setting has a name near it (the mode is APPENDGUARD itself; ";
    }
    line += "the settings: man appendguard, or `appendguard run --help`)";
    return line;
  }
  return {};
}

std::string settings_present(const char* const* environment) {
  std::string names;
  if (!environment) return names;
  for (const char* const* e = environment; *e; ++e) {
    std::string_view name = name_of(*e);
    if (!is_our_prefix(name) || name == kPrefix) continue;
    const Variable* v = find_variable(name);
    if (v && v->kind != VariableKind::kSetting) continue;
    if (!names.empty()) names += ", ";
    names += name;
  }
  return names;
}

void OurEnvironment::gather(const char* const* environment) {
  count = 0;
  overflow = false;
  if (!environment) return;
  for (const char* const* e = environment; *e; ++e) {
    if (std::strncmp(*e, kPrefix.data(), kPrefix.size()) != 0) continue;
    if (count == kCapacity) {
      overflow = true;
      return;
    }
    entries[count++] = *e;
  }
}

const char* OurEnvironment::value_of(const char* name) const {
  const size_t length = std::strlen(name);
  for (size_t i = 0; i < count; ++i) {
    const char* entry = entries[i];
    if (std::strncmp(entry, name, length) == 0 && entry[length] == '=') return entry + length + 1;
  }
  return nullptr;
}

}  // namespace appendguard
