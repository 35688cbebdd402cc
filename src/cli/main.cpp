// The `appendguard` launcher: `appendguard run -- CMD` runs CMD with the preload library enabled;
// `appendguard doctor [CMD]` checks that interposition works here and can reach CMD.
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "cli/binary_check.h"
#include "cli/doctor_output.h"
#include "cli/input_file.h"
#include "cli/launch_options.h"
#include "cli/mount_probe.h"
#include "cli/report_command.h"
#include "core/config.h"
#include "core/mount_table.h"
#include "core/pattern_check.h"

using namespace appendguard;

namespace {

constexpr const char* kVersion = "appendguard 0.1.0";

constexpr const char* kUsage =
    "usage: appendguard run [OPTIONS] -- COMMAND [ARGS...]\n"
    "       appendguard doctor [--json] [COMMAND | DIR]\n"
    "       appendguard report [--json] [--html OUT.html] LOG... (or - for standard input)\n"
    "       appendguard --help | -V | --version\n"
    "       appendguard SUBCOMMAND --help\n"
    "\n"
    "run:    runs COMMAND with libappendguard.so preloaded and enabled.\n"
    "doctor: checks the library, the configuration, that interposition works here, and whether COMMAND can\n"
    "        be reached by it; with DIR, what the mount under DIR accepts.\n"
    "report: violations in report logs, grouped, with a count and the first report of each group;\n"
    "        --html OUT.html: a page with a timeline of every guarded file's operations.\n";

constexpr const char* kDoctorUsage =
    "usage: appendguard doctor [--json] [COMMAND | DIR]\n"
    "Checks the library, the effective configuration (from the environment) and that interposition works\n"
    "here. With COMMAND (found in PATH; #! scripts and pyenv-style shims are followed to the program they\n"
    "run): whether the library can reach it. With DIR: the mount under DIR (type, source, options), a probe\n"
    "of each append-only rule with a scratch file in DIR, what the library does about each, and the\n"
    "settings it recommends. --json: the same facts as one JSON object.\n"
    "Exit status: 0 all good, 1 problems found, 2 bad arguments.\n";

// printf into a std::string (doctor's lines).
__attribute__((format(printf, 1, 2))) std::string strf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  int size = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(size > 0 ? static_cast<size_t>(size) : 0, '\0');
  if (size > 0) std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  return out;
}

std::string self_path() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  buf[n] = '\0';
  return buf;
}

bool is_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// Where `cmake --install` puts the library, relative to where it puts us (GNUInstallDirs: lib, lib64 or
// lib/<multiarch>); the wheel has bin/ and lib/ side by side in the appendguard package.
#ifndef APPENDGUARD_LIBDIR_FROM_BINDIR
#define APPENDGUARD_LIBDIR_FROM_BINDIR "../lib"
#endif

// APPENDGUARD_LIBRARY, else beside us when installed or in the wheel, else in the build tree.
std::string find_library() {
  if (const char* explicit_path = getenv("APPENDGUARD_LIBRARY")) return explicit_path;
  std::string exe = self_path();
  std::string dir = exe.substr(0, exe.rfind('/'));
  for (const char* relative : {"/" APPENDGUARD_LIBDIR_FROM_BINDIR "/libappendguard.so",
                               "/../lib/libappendguard.so", "/../shim/libappendguard.so"}) {
    std::string candidate = dir + relative;
    if (is_file(candidate)) {
      char resolved[PATH_MAX];
      return realpath(candidate.c_str(), resolved) ? resolved : candidate;
    }
  }
  return {};
}

// The configuration the command would get, checked with the library's own parser and messages.
ConfigResult configuration_of(const LaunchPlan& plan) {
  static std::map<std::string, std::string> merged;
  merged.clear();
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    size_t eq = entry.find('=');
    if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [name, value] : plan.environment) merged[name] = value;
  std::vector<std::string> entries;
  entries.reserve(merged.size());
  for (const auto& [name, value] : merged) entries.push_back(std::string(name).append("=").append(value));
  std::vector<const char*> environment;
  environment.reserve(entries.size() + 1);
  for (const std::string& entry : entries) environment.push_back(entry.c_str());
  environment.push_back(nullptr);
  ConfigResult result = parse_config(
      [](const char* name) -> const char* {
        auto it = merged.find(name);
        return it == merged.end() ? nullptr : it->second.c_str();
      },
      environment.data());
  auto found = merged.find("APPENDGUARD_PATHS");
  if (result.ok() && result.config.mode != Mode::kOff) {
    for (std::string& notice : pattern_notices(found == merged.end() ? "" : found->second, is_directory)) {
      result.notices.push_back(std::move(notice));
    }
  }
  return result;
}

std::string check_configuration(const LaunchPlan& plan) {
  return configuration_of(plan).error;
}

// What launcher_warning needs: the program (symlinks followed: /usr/bin/mpirun is Open MPI's or MPICH's),
// the environment the command gets, and regular files (hostfiles, .deepspeed_env, a Ray runtime env).
LauncherContext launcher_context(const LaunchPlan& plan) {
  LauncherContext context;
  if (std::string program = find_in_path(plan.command[0]); !program.empty()) {
    char resolved[PATH_MAX];
    context.program = realpath(program.c_str(), resolved) ? resolved : program;
  }
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    if (size_t eq = entry.find('='); eq != std::string::npos) {
      context.environment[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
  }
  for (const auto& [name, value] : plan.environment) context.environment[name] = value;
  context.read_file = [](const std::string& path) -> std::optional<std::string> {
    InputFile file = read_regular_file(path);
    if (!file.ok) return std::nullopt;
    return file.data;
  };
  return context;
}

int run(const std::vector<std::string>& args) {
  std::string library = find_library();
  if (library.empty() || !is_file(library)) {
    std::fprintf(stderr, "appendguard run: cannot find libappendguard.so (set APPENDGUARD_LIBRARY)\n");
    return 2;
  }
  const char* preload = getenv("LD_PRELOAD");
  const char* mode = getenv("APPENDGUARD");
  LaunchParse parse = parse_run_arguments(args, library, preload ? preload : "", mode ? mode : "");
  if (!parse.ok()) {
    std::fprintf(stderr, "%s\n", parse.error.c_str());
    return 2;
  }
  if (std::string error = check_configuration(parse.plan); !error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 2;
  }
  if (std::string program = find_in_path(parse.plan.command[0]); !program.empty()) {
    if (std::string warning = coverage_warning(program); !warning.empty()) {
      std::fprintf(stderr, "%s\n", warning.c_str());
    }
  }
  if (std::string warning = launcher_warning(parse.plan.command, launcher_context(parse.plan));
      !warning.empty()) {
    std::fprintf(stderr, "%s\n", warning.c_str());
  }
  for (const auto& [name, value] : parse.plan.environment) setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> argv;
  for (auto& word : parse.plan.command) argv.push_back(word.data());
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::fprintf(stderr, "appendguard run: cannot run '%s': %s\n", argv[0], std::strerror(errno));
  return errno == ENOENT ? 127 : 126;
}

// The interposition check: /bin/sh (dynamically linked everywhere we run) and dd, with the library
// preloaded. The launcher itself is statically linked (no GLIBC_ versions to require), so it cannot be
// its own probe. An append must be accepted and dd's write at offset 0 refused, leaving "abcdefgh".
constexpr const char* kProbeScript =
    "printf abcd > \"$1\" || exit 3\n"
    "printf efgh >> \"$1\" || exit 3\n"
    "printf x | dd of=\"$1\" conv=notrunc 2>/dev/null && exit 4\n"
    "exit 0\n";

// Whether Syscall User Dispatch can be armed here (the library's raw-system-call layer): tried in a child,
// with the selector at ALLOW, so that nothing is trapped. Returns 0 or the errno of the prctl.
int syscall_dispatch_error() {
  pid_t pid = fork();
  if (pid < 0) return errno;
  if (pid == 0) {
    static char selector = 0;  // SYSCALL_DISPATCH_FILTER_ALLOW
    // PR_SET_SYSCALL_USER_DISPATCH (59), PR_SYS_DISPATCH_ON (1): this program's own text is allowed.
    _exit(prctl(59, 1, reinterpret_cast<unsigned long>(&syscall_dispatch_error), 4096UL, &selector) == 0
              ? 0
              : errno);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return ECHILD;
  return WEXITSTATUS(status);
}

void print_syscall_layer(DoctorOutput& out) {
  const char* setting = getenv("APPENDGUARD_SYSCALLS");
  std::string value = setting && *setting ? setting : "auto";
  if (value == "off") {
    out.field("raw syscalls", "not covered (APPENDGUARD_SYSCALLS=off)");
    return;
  }
  int error = syscall_dispatch_error();
  if (error == 0) {
    out.field(
        "raw syscalls",
        strf("covered %s (Syscall User Dispatch can be armed here)",
             value == "always" ? "from start-up"
                               : "in the threads that open or create guarded files, while one is open"));
  } else {
    out.field(
        "raw syscalls",
        strf("NOT covered: prctl(PR_SET_SYSCALL_USER_DISPATCH) fails with %s (%s); calls through libc are",
             errno_name(error),
             error == EINVAL ? "Linux 5.11+ is needed" : "refused by a seccomp policy or a sandbox"));
  }
}

bool interposition_works(const std::string& library, const std::string& dir) {
  std::string path = dir + "/selftest.safetensors";
  pid_t child = fork();
  if (child == 0) {
    // The defaults, whatever the caller's APPENDGUARD_* (REOPEN=rewrite or ON_VIOLATION=warn would change
    // what the probe sees).
    std::vector<std::string> ours;
    for (char** e = environ; *e; ++e) {
      if (std::strncmp(*e, "APPENDGUARD", 11) == 0) ours.emplace_back(*e, std::strcspn(*e, "="));
    }
    for (const std::string& name : ours) unsetenv(name.c_str());
    setenv("LD_PRELOAD", library.c_str(), 1);
    setenv("APPENDGUARD", "1", 1);
    setenv("APPENDGUARD_PATHS", "*.safetensors", 1);
    setenv("APPENDGUARD_LOG", "/dev/null", 1);
    execl("/bin/sh", "sh", "-c", kProbeScript, "sh", path.c_str(), static_cast<char*>(nullptr));
    _exit(5);
  }
  int status = 0;
  if (child > 0) waitpid(child, &status, 0);
  std::ifstream in(path, std::ios::binary);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unlink(path.c_str());
  return child > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && content == "abcdefgh";
}

// A pyenv-style shim (a script that runs `.../libexec/pyenv exec NAME`): the program `pyenv which NAME`
// names, else "".
std::string pyenv_target(const std::string& script) {
  InputFile file = read_regular_file(script);
  if (!file.ok || file.data.size() > (1 << 16)) return {};
  const std::string& text = file.data;
  size_t at = text.find("/libexec/pyenv\" exec");
  if (at == std::string::npos) return {};
  size_t quote = text.rfind('"', at);
  if (quote == std::string::npos) return {};
  std::string pyenv = text.substr(quote + 1, at + std::strlen("/libexec/pyenv") - quote - 1);
  std::string name = script.substr(script.rfind('/') + 1);
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return {};
  pid_t child = fork();
  if (child == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDERR_FILENO);
    close(pipe_fds[0]);
    execl(pyenv.c_str(), "pyenv", "which", name.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  InputFile out = read_bounded(pipe_fds[0], 1 << 16, 1 << 16);
  close(pipe_fds[0]);
  int status = 0;
  if (child > 0) waitpid(child, &status, 0);
  if (child <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !out.ok) return {};
  std::string path = out.data.substr(0, out.data.find('\n'));
  return is_file(path) ? path : std::string();
}

void print_configuration(DoctorOutput& out, const ConfigResult& result, int& problems) {
  if (!result.ok()) {
    out.field("configuration", result.error);
    ++problems;
    return;
  }
  const Config& c = result.config;
  std::string paths = getenv("APPENDGUARD_PATHS") ? getenv("APPENDGUARD_PATHS") : "*.safetensors";
  const char* fs = getenv("APPENDGUARD_FS");
  out.field("configuration", "valid; as `appendguard run` would start a program:");
  out.detail(strf("  mode %s, paths %s, on violation %s (%s), log %s", mode_name(c.mode), paths.c_str(),
                  action_name(c.on_violation), errno_name(c.violation_errno), c.log_target.c_str()));
  out.detail(strf("  mounts %s, reopen %s, prealloc %s, trace %s, summary %s, backtrace %d, python stack %s",
                  fs ? fs : "known", reopen_name(c.reopen),
                  c.prealloc == Prealloc::kRefuse ? "refuse" : "defer", c.trace ? "on" : "off",
                  c.summary ? "on" : "off", c.backtrace_frames, c.python_stack ? "on" : "off"));
  for (const std::string& notice : result.notices) {
    out.detail("  PROBLEM: " + notice);
    ++problems;
  }
}

int doctor_directory(DoctorOutput& out, const std::string& dir, const std::string& library, Reopen reopen) {
  char resolved[PATH_MAX];
  if (!realpath(dir.c_str(), resolved)) {
    std::fprintf(stderr, "appendguard doctor: cannot resolve '%s': %s\n", dir.c_str(), std::strerror(errno));
    return 2;
  }
  InputFile mountinfo;
  if (int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC); fd >= 0) {
    mountinfo = read_bounded(fd, size_t{64} << 20, size_t{1} << 20);
    close(fd);
  } else {
    mountinfo.error = std::strerror(errno);
  }
  MountInfo mount;
  if (!mountinfo.ok || !mount_of(mountinfo.data, resolved, mount)) {
    out.field("mount", strf("unknown (/proc/self/mountinfo: %s)",
                            mountinfo.ok ? "no mount holds it" : mountinfo.error.c_str()));
  } else {
    out.field("mount", strf("%s: type %s, source %s", mount.entry.mount_point.c_str(),
                            mount.entry.type.c_str(), mount.entry.source.c_str()));
    out.detail(strf("                options %s; %s", mount.options.c_str(), mount.super_options.c_str()));
    if (mount.entry.type == "fuse.rclone")
      out.detail(strf(
          "                rclone --vfs-cache-mode %s%s", rclone_cache_mode_name(mount.entry.rclone_mode),
          mount.entry.rclone_mode == RcloneCacheMode::kUnknown
              ? " (its process is not visible here: taken as write-once)"
          : is_rclone_cached(mount.entry) ? " (from its command line: not write-once, not guarded whole)"
                                          : " (from its command line: write-once)"));
  }
  MountSelection selection;
  if (const char* fs = getenv("APPENDGUARD_FS")) parse_mount_selection(fs, selection);
  bool known = is_append_only_mount(mount.entry, selection);
  out.field("whole mount", known ? "every file written here is guarded, whatever its name"
                                 : "only files that APPENDGUARD_PATHS names are guarded here");
  // The library's own decision (core/config.h reopen_choice, as shim/held_sessions.cpp makes it).
  const StoreKind kind = classify_store(mount.entry);
  const ReopenChoice choice = reopen_choice(reopen, kind);
  out.field("reopen", describe_reopen(choice, reopen, kind));
  // The scratch files go in a directory of our own (mode 0700), so that no other user of a shared
  // directory can put a file or a symlink of theirs under a name the probe opens.
  std::string scratch_template = std::string(resolved) + "/.appendguard-doctor-XXXXXX";
  if (!mkdtemp(scratch_template.data())) {
    out.field("probe",
              strf("FAILED: cannot create a scratch directory in %s: %s", resolved, std::strerror(errno)));
    return 1;
  }
  const std::string scratch = scratch_template;
  struct ScratchRemover {
    const std::string& dir;
    ~ScratchRemover() { rmdir(dir.c_str()); }
  } remover{scratch};
  std::string error;
  std::vector<ProbeResult> results = probe_directory(scratch, error);
  if (results.empty()) {
    out.field("probe", "FAILED: " + error);
    return 1;
  }
  out.text(strf("probe of %s (scratch files, removed):", resolved));
  out.json_only("probe_directory", resolved);
  out.text(strf("  %-38s %-34s %s", "rule", "without the library", "with it (expected)"));
  for (const ProbeResult& r : results) {
    std::string with = with_library(r.rule, results, choice, mount.entry.renames);
    out.row("probe", strf("  %-38s %-34s %s", rule_name(r.rule), r.detail.c_str(), with.c_str()),
            {{"rule", rule_name(r.rule)}, {"without", r.detail}, {"with", with}});
  }
  // Measured, not predicted: sh and dd on a scratch *.safetensors file, without and with the library.
  int problems = 0;
  out.text("measured with sh and dd (without the library / with it):");
  for (const ShellCase& c : shell_cases()) {
    Outcome without = run_shell_case(c, scratch, "");
    Outcome with = run_shell_case(c, scratch, library);
    std::string problem = case_problem(c, without, with);
    out.row("measured",
            strf("  %-42s %-28s %s%s%s", c.name, outcome_name(without), outcome_name(with),
                 problem.empty() ? "" : "  PROBLEM: ", problem.c_str()),
            {{"case", c.name},
             {"without", outcome_name(without)},
             {"with", outcome_name(with)},
             {"problem", problem}});
    if (!problem.empty()) ++problems;
  }
  out.text("recommended:");
  for (const std::string& line : recommendations(mount, known, results, choice))
    out.row("recommended_settings", "  - " + line, {{"setting", line}});
  return problems ? 1 : 0;
}

int doctor(std::vector<std::string> args) {
  int problems = 0;
  const bool json = !args.empty() && args[0] == "--json";
  if (json) args.erase(args.begin());
  if (!args.empty() && args[0].starts_with("-")) {
    std::fprintf(stderr, "appendguard doctor: unknown option '%s': accepted: --json, --help, COMMAND, DIR\n",
                 args[0].c_str());
    return 2;
  }
  DoctorOutput out(json);
  // The verdict line (text) or the object (JSON), and the status.
  auto verdict = [&](int status) {
    if (json) {
      std::printf("%s\n", out.finish(problems, status).c_str());
    } else if (status != 2) {
      std::printf("%s\n", problems ? "appendguard doctor: problems found" : "appendguard doctor: all good");
    }
    return status;
  };
  // The command is checked first: a bad argument is one line and status 2, before any other output.
  std::string command_path;
  bool directory = !args.empty() && is_directory(args[0].c_str());
  BinaryCheck check;
  if (!args.empty() && !directory) {
    command_path = find_in_path(args[0]);
    if (command_path.empty()) {
      std::fprintf(stderr, "appendguard doctor: '%s' is not found in PATH\n", args[0].c_str());
      return 2;
    }
    check = check_binary(command_path);
    if (check.kind == BinaryKind::kUnreadable) {
      std::fprintf(stderr, "appendguard doctor: cannot read '%s': %s\n", command_path.c_str(),
                   check.detail.c_str());
      return 2;
    }
  }
  std::string library = find_library();
  if (library.empty() || !is_file(library)) {
    out.field("library", "NOT FOUND (set APPENDGUARD_LIBRARY)");
    ++problems;
    return json ? verdict(1) : 1;
  }
  out.field("library", library);
  const char* mode = getenv("APPENDGUARD");
  LaunchParse parse = parse_run_arguments({"--", "true"}, library, "", mode ? mode : "");
  if (!parse.ok()) {
    out.field("configuration", parse.error);
    ++problems;
  } else {
    print_configuration(out, configuration_of(parse.plan), problems);
  }
  char dir_template[] = "/tmp/appendguard-doctor-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  bool works = dir && interposition_works(library, dir);
  if (dir) rmdir(dir);
  out.field("interposition", works ? "works (a backward write to a guarded file was refused)"
                                   : "FAILED (LD_PRELOAD did not take effect here)");
  if (!works) ++problems;
  print_syscall_layer(out);
  if (directory) {
    Reopen reopen = parse.ok() ? configuration_of(parse.plan).config.reopen : Reopen::kAuto;
    int status = doctor_directory(out, args[0], library, reopen);
    if (status == 2) return 2;
    if (status != 0) ++problems;
  } else if (!args.empty()) {
    out.field("command", strf("%s: %s%s%s", command_path.c_str(), describe(check.kind),
                              check.detail.empty() ? "" : ": ", check.detail.c_str()));
    std::string current = command_path;
    BinaryCheck inner = check;
    for (int level = 0; level < 4 && inner.kind == BinaryKind::kScript; ++level) {
      std::string next = pyenv_target(current);
      const char* label = "shim for";
      if (next.empty()) {
        next = script_interpreter(inner.detail);
        label = "interpreter";
      }
      inner = check_binary(next);
      out.field(label,
                strf("%s: %s%s%s", next.c_str(), describe(inner.kind),
                     inner.kind == BinaryKind::kUnreadable || inner.kind == BinaryKind::kScript ? ": " : "",
                     inner.kind == BinaryKind::kUnreadable || inner.kind == BinaryKind::kScript
                         ? inner.detail.c_str()
                         : ""));
      current = next;
    }
    if (inner.kind != BinaryKind::kDynamic) ++problems;
  }
  out.json_only("verdict", problems ? "problems found" : "all good");
  return verdict(problems ? 1 : 0);
}

bool wants_help(const std::vector<std::string>& args) {
  return !args.empty() && (args[0] == "--help" || args[0] == "-h");
}

int dispatch(std::vector<std::string> args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  std::string command = args[0];
  args.erase(args.begin());
  if (command == "--version" || command == "-V") {
    std::printf("%s\n", kVersion);
    return 0;
  }
  if (command == "run") {
    if (wants_help(args)) {
      std::fputs(run_usage().c_str(), stdout);
      return 0;
    }
    return run(args);
  }
  if (command == "doctor") {
    if (wants_help(args)) return std::fputs(kDoctorUsage, stdout), 0;
    return doctor(args);
  }
  if (command == "report") {
    if (wants_help(args)) return std::fputs(kReportUsage, stdout), 0;
    return report_command(args);
  }
  std::fprintf(stderr,
               "appendguard: unknown command '%s': accepted: run, doctor, report, --help, -V, --version\n",
               command.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // No uncaught exception: whatever escapes (std::bad_alloc, an I/O failure) is one line and status 2.
  try {
    return dispatch(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "appendguard: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "appendguard: internal error (unknown exception)\n");
  }
  return 2;
}
