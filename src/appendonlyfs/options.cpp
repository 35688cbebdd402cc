#include "options.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <string_view>

namespace appendonlyfs {

namespace {

constexpr std::string_view kOwnOptions =
    "profile, truncate, hdfs_open, short_writes, fail_after, eio_every, delay_us, flush_eio, unlink_open, "
    "log";

// libfuse mount options that are safe to pass through; anything else is an error, so that a typo in
// a fault option never silently runs an unfaulted mount.
constexpr std::array<std::string_view, 6> kFuseFlags = {"allow_other",         "allow_root", "auto_unmount",
                                                        "default_permissions", "ro",         "rw"};
constexpr std::array<std::string_view, 3> kFuseValueOptions = {"fsname", "subtype", "max_read"};

std::string accepted_options() {
  std::string text(kOwnOptions);
  for (std::string_view flag : kFuseFlags) text.append(", ").append(flag);
  for (std::string_view option : kFuseValueOptions) text.append(", ").append(option).append("=");
  return text;
}

std::string error_line(std::string_view message) {
  return "appendonlyfs: " + std::string(message);
}

std::optional<std::uint64_t> parse_unsigned(std::string_view text) {
  std::uint64_t value = 0;
  if (text.empty()) return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

class OptionParser {
 public:
  explicit OptionParser(Options& options) : options_(options) {}

  // Parses one `key[=value]` of a -o list; returns an error line or nothing.
  std::optional<std::string> parse(std::string_view option) {
    const std::size_t equals = option.find('=');
    const std::string_view key = option.substr(0, equals);
    const bool has_value = equals != std::string_view::npos;
    const std::string_view value = has_value ? option.substr(equals + 1) : std::string_view();

    if (key == "profile") return parse_profile_value(value);
    if (key == "truncate") return parse_truncate_value(value);
    if (key == "hdfs_open") return parse_hdfs_open_value(value);
    if (key == "short_writes") return parse_number(key, value, 1, options_.faults.short_writes);
    if (key == "eio_every") return parse_number(key, value, 1, options_.faults.eio_every);
    if (key == "delay_us") return parse_number(key, value, 0, options_.faults.delay_us);
    if (key == "fail_after") {
      std::uint64_t bytes = 0;
      if (auto error = parse_number(key, value, 0, bytes)) return error;
      options_.faults.fail_after = bytes;
      return std::nullopt;
    }
    if (key == "flush_eio" && !has_value) {
      options_.faults.flush_eio = true;
      return std::nullopt;
    }
    if (key == "unlink_open") {
      if (value != "remove" && value != "rename") return invalid(key, value, "remove or rename");
      options_.rename_open_unlinked = value == "rename";
      return std::nullopt;
    }
    if (key == "log") {
      if (value.empty()) return invalid(key, value, "a file path");
      options_.log_path = value;
      return std::nullopt;
    }
    if (key == "debug" && !has_value) {
      options_.debug = true;
      options_.foreground = true;
      return std::nullopt;
    }
    if ((!has_value && contains(kFuseFlags, key)) || (has_value && contains(kFuseValueOptions, key))) {
      options_.fuse_options.emplace_back(option);
      return std::nullopt;
    }
    return error_line("unknown -o option '" + std::string(option) + "': accepted options are " +
                      accepted_options());
  }

 private:
  static std::optional<std::string> invalid(std::string_view key, std::string_view value,
                                            std::string_view accepted) {
    return error_line("invalid value '" + std::string(value) + "' for -o " + std::string(key) +
                      ": expected " + std::string(accepted));
  }

  std::optional<std::string> parse_profile_value(std::string_view value) {
    const auto profile = appendonlyfs::parse_profile(value);
    if (!profile) return invalid("profile", value, "one of " + profile_names());
    options_.profile = *profile;
    return std::nullopt;
  }

  std::optional<std::string> parse_hdfs_open_value(std::string_view value) {
    if (value == "replace") {
      options_.hdfs_open = HdfsOpen::replace;
    } else if (value == "translate") {
      options_.hdfs_open = HdfsOpen::translate;
    } else {
      return invalid("hdfs_open", value, "replace or translate");
    }
    return std::nullopt;
  }

  std::optional<std::string> parse_truncate_value(std::string_view value) {
    if (value == "refuse") {
      options_.non_zero_truncate = NonZeroTruncate::refuse;
    } else if (value == "ignore") {
      options_.non_zero_truncate = NonZeroTruncate::ignore;
    } else {
      return invalid("truncate", value, "refuse or ignore");
    }
    return std::nullopt;
  }

  static std::optional<std::string> parse_number(std::string_view key, std::string_view value,
                                                 std::uint64_t minimum, std::uint64_t& out) {
    const auto number = parse_unsigned(value);
    if (!number || *number < minimum) {
      return invalid(key, value, minimum == 0 ? "a non-negative integer" : "a positive integer");
    }
    out = *number;
    return std::nullopt;
  }

  Options& options_;
};

std::optional<std::string> parse_option_list(std::string_view list, OptionParser& parser) {
  while (true) {
    const std::size_t comma = list.find(',');
    const std::string_view option = list.substr(0, comma);
    if (!option.empty()) {
      if (auto error = parser.parse(option)) return error;
    }
    if (comma == std::string_view::npos) return std::nullopt;
    list.remove_prefix(comma + 1);
  }
}

ParseResult fail(std::string message) {
  ParseResult result;
  result.action = CommandAction::error;
  result.error = std::move(message);
  return result;
}

std::optional<std::string> check_directory(std::string_view what, const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    return error_line(std::string(what) + " '" + path + "' does not exist: expected an existing directory");
  }
  if (!S_ISDIR(status.st_mode)) {
    return error_line(std::string(what) + " '" + path +
                      "' is not a directory: expected an existing directory");
  }
  return std::nullopt;
}

}  // namespace

ParseResult parse_command_line(std::span<const std::string> args) {
  ParseResult result;
  OptionParser parser(result.options);
  std::vector<std::string> positional;
  bool only_positional = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (only_positional || arg.empty() || arg[0] != '-') {
      positional.push_back(arg);
    } else if (arg == "--") {
      only_positional = true;
    } else if (arg == "-h" || arg == "--help") {
      result.action = CommandAction::help;
      return result;
    } else if (arg == "-V" || arg == "--version") {
      result.action = CommandAction::version;
      return result;
    } else if (arg == "-f") {
      result.options.foreground = true;
    } else if (arg == "-s") {
      result.options.single_threaded = true;
    } else if (arg == "-d") {
      result.options.debug = true;
      result.options.foreground = true;
    } else if (arg == "-o") {
      if (i + 1 == args.size()) return fail(error_line("option -o needs a value: -o OPTION[,OPTION...]"));
      if (auto error = parse_option_list(args[++i], parser)) return fail(*error);
    } else if (arg.starts_with("-o")) {
      if (auto error = parse_option_list(std::string_view(arg).substr(2), parser)) return fail(*error);
    } else {
      return fail(error_line("unknown argument '" + arg +
                             "': accepted are -o OPTION[,...], -f, -s, -d, --help, --version"));
    }
  }
  if (positional.size() < 2) {
    return fail(error_line(std::string("missing ") +
                           (positional.empty() ? "BACKING and MOUNTPOINT" : "MOUNTPOINT") +
                           " argument: usage appendonlyfs [-o OPTIONS] [-f] BACKING MOUNTPOINT"));
  }
  if (positional.size() > 2) {
    return fail(
        error_line("unexpected argument '" + positional[2] + "': expected exactly BACKING and MOUNTPOINT"));
  }
  result.options.backing = positional[0];
  result.options.mountpoint = positional[1];
  return result;
}

std::optional<std::string> check_directories(const Options& options) {
  if (auto error = check_directory("BACKING", options.backing)) return error;
  return check_directory("MOUNTPOINT", options.mountpoint);
}

namespace {

// The -o profile= lines: one entry per profile of profiles.cpp, its help text's lines aligned.
std::string profile_usage() {
  std::string text = "  -o profile=" + profile_names("|");
  text.resize(std::max<std::size_t>(text.size() + 1, 30), ' ');
  text += "write rules to emulate (default " + std::string(profiles().front().name) + "):\n";
  for (const ProfileSpec& spec : profiles()) {
    std::string line = std::string(32, ' ') + std::string(spec.name);
    std::string_view help = spec.help;
    while (true) {
      line.resize(std::max<std::size_t>(line.size() + 1, 40), ' ');
      const std::size_t newline = help.find('\n');
      text += line.append(help.substr(0, newline)) + "\n";
      if (newline == std::string_view::npos) break;
      help.remove_prefix(newline + 1);
      line.clear();
    }
  }
  return text;
}

}  // namespace

std::string usage_text() {
  return R"(usage: appendonlyfs [-o OPTION[,OPTION...]] [-f] [-s] [-d] BACKING MOUNTPOINT

Mounts BACKING at MOUNTPOINT and applies the write rules of an append-only store.
Unmount with: fusermount3 -u MOUNTPOINT

Options:
)" + profile_usage() +
         R"(  -o hdfs_open=replace|translate
                              hdfs: how an existing file opens for writing. replace (default): O_WRONLY
                              replaces it, O_RDWR is a read stream. translate: as fuse_dfs's
                              get_hdfs_open_flags(): an empty file or O_TRUNC replaces, O_RDWR on a
                              non-empty file is a read stream, O_WRONLY on a non-empty file appends
  -o truncate=refuse|ignore   hdfs: truncate to a non-zero size fails EOPNOTSUPP (refuse, default)
                              or returns 0 and does nothing (ignore, as on Apache trunk)
  -o short_writes=N           every write stores at most N bytes and returns that short count
  -o fail_after=BYTES         after BYTES bytes written through the mount, writes fail ENOSPC
  -o flush_eio                every flush (each close of a descriptor) fails EIO, as a failed upload
  -o unlink_open=rename       an unlink of an open file is renamed away (libfuse's default), which a
                              profile without rename refuses
  -o eio_every=N              every Nth accepted write fails EIO and stores nothing
  -o delay_us=N               sleep N microseconds before each write
  -o log=FILE                 append one line per refusal or injected fault to FILE
  -o allow_other,allow_root,auto_unmount,default_permissions,ro,rw,fsname=X,subtype=X,max_read=N
                              passed to libfuse
  -f                          stay in the foreground
  -s                          single-threaded
  -d, -o debug                libfuse debug output (implies -f)
  -h, --help                  this text
  -V, --version               print the version
)";
}

}  // namespace appendonlyfs
