#include "core/variables.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace appendguard {
namespace {

constexpr const char* kBool = "1, on, yes, true; 0, off, no, false";

constexpr Variable kVariables[] = {
    {"APPENDGUARD", VariableKind::kSetting, "unset, empty, 0, off; 1, on, enforce; audit", "inert",
     "inert: every hook passes through; enforce: rewrite and refuse; audit: change nothing, report"},
    {"APPENDGUARD_PATHS", VariableKind::kSetting, "colon-separated glob patterns", "*.safetensors",
     "which files are guarded (a pattern with '/' matches the absolute path)"},
    {"APPENDGUARD_ON_VIOLATION", VariableKind::kSetting, "error, abort, warn", "error (warn in audit)",
     "what happens to a call that breaks the rule"},
    {"APPENDGUARD_ERRNO", VariableKind::kSetting,
     "an errno name (EOPNOTSUPP, EPERM, EIO, ...) or a number 1-4095, not EINTR or EAGAIN", "EOPNOTSUPP",
     "the errno of a refused call"},
    {"APPENDGUARD_LOG", VariableKind::kSetting, "stderr or a path (%p pid, %h host, %r rank)", "stderr",
     "where reports, trace lines and summaries go"},
    {"APPENDGUARD_BACKTRACE", VariableKind::kSetting, "0-256", "32", "native frames per report (0 for none)"},
    {"APPENDGUARD_TRACE", VariableKind::kSetting, kBool, "off", "one line per operation on a guarded file"},
    {"APPENDGUARD_PYTHON_STACK", VariableKind::kSetting, kBool, "on", "add the Python stack to reports"},
    {"APPENDGUARD_REOPEN", VariableKind::kSetting, "append, rewrite", "append",
     "how enforce mode reopens an existing file for writing"},
    {"APPENDGUARD_HOLD_SECONDS", VariableKind::kSetting, "0-86400 (0: no limit)", "60",
     "a held write session is committed after this many seconds without a reopen"},
    {"APPENDGUARD_FS", VariableKind::kSetting,
     "known; fuse; none; or a comma-separated list of mount types, sources and mount points", "known",
     "the mounts on which every file opened for writing is guarded"},
    {"APPENDGUARD_PREALLOC", VariableKind::kSetting, "defer, refuse", "defer",
     "what enforce mode does with a call that only grows a guarded file"},
    {"APPENDGUARD_SUMMARY", VariableKind::kSetting, kBool, "on with a log file, off on stderr",
     "one summary line at exit from a process that touched guarded files"},
    {"APPENDGUARD_FORMAT", VariableKind::kSetting, "text, json", "text",
     "json: every report, trace line, notice and summary is one JSON object per line"},
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

std::string check_variable_names(const char* const* environment) {
  if (!environment) return {};
  for (const char* const* e = environment; *e; ++e) {
    std::string_view name = name_of(*e);
    if (!is_our_prefix(name) || find_variable(name)) continue;
    std::string line = "appendguard: unknown variable ";
    line += name;
    line += ": did you mean ";
    line += closest_setting(name).name;
    line += "? (accepted: the variables in docs/reference.md; `appendguard run --help` lists them)";
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

}  // namespace appendguard
