#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/variables.h"
#include "fake_environment.h"

using namespace appendguard;

namespace {

using testing::fake_env;
using testing::fake_environment;

// parse_config over `env`, with the same entries as its environ.
ConfigResult parse_with_environment(std::map<std::string, std::string> env) {
  fake_environment() = std::move(env);
  static std::vector<std::string> entries;
  static std::vector<const char*> pointers;
  entries.clear();
  pointers.clear();
  for (const auto& [name, value] : fake_environment()) entries.push_back(name + "=" + value);
  for (const std::string& entry : entries) pointers.push_back(entry.c_str());
  pointers.push_back(nullptr);
  return parse_config(fake_env, pointers.data());
}

}  // namespace

TEST_CASE("edit distance") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("abc", "abc") == 0);
  CHECK(edit_distance("APPENDGUARD_PATH", "APPENDGUARD_PATHS") == 1);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("", "abc") == 3);
}

TEST_CASE("the closest setting of a misspelt name") {
  CHECK(std::string(closest_setting("APPENDGUARD_PATH").name) == "APPENDGUARD_PATHS");
  CHECK(std::string(closest_setting("APPENDGUARD_ONVIOLATION").name) == "APPENDGUARD_ON_VIOLATION");
  CHECK(std::string(closest_setting("APPENDGUARD_ERRNOS").name) == "APPENDGUARD_ERRNO");
  CHECK(std::string(closest_setting("APPENDGUARDLOG").name) == "APPENDGUARD_LOG");
  CHECK(std::string(closest_setting("APPENDGUARD_MODE").name) != "APPENDGUARD_CARRIED_FDS");  // a setting
}

TEST_CASE("a misspelt name is answered by the name nearest it, else by the setting its value fits") {
  CHECK(suggest_setting("APPENDGUARD_PATH", "/mnt/**") == "APPENDGUARD_PATHS");
  CHECK(suggest_setting("APPENDGUARD_MODE", "enforcee") == "APPENDGUARD=enforce");
  CHECK(suggest_setting("APPENDGUARD_MODE", "audit") == "APPENDGUARD=audit");
  CHECK(suggest_setting("APPENDGUARD_WHEN_BAD", "abrt") == "APPENDGUARD_ON_VIOLATION=abort");
  CHECK(suggest_setting("APPENDGUARD_MODE", "1") == "");  // no name near, a value every switch takes
}

TEST_CASE("the unknown name's line shows its value, escaped and cut") {
  const char* env[] = {"APPENDGUARD_MODE=enforcee", nullptr};
  CHECK(check_variable_names(env) ==
        "appendguard: unknown variable APPENDGUARD_MODE='enforcee': did you mean APPENDGUARD=enforce? (the "
        "settings: man appendguard, or `appendguard run --help`)");
  std::string long_value = "APPENDGUARD_XYZZY=\n" + std::string(100, 'v');
  const char* odd[] = {long_value.c_str(), nullptr};
  std::string line = check_variable_names(odd);
  CHECK(line.find("APPENDGUARD_XYZZY='\\x0a" + std::string(79, 'v') +
                  "...': no setting has a name near it") != std::string::npos);
}

TEST_CASE("the table: unique names with the prefix, help for each") {
  std::map<std::string, int> seen;
  for (const Variable& v : known_variables()) {
    CHECK(is_our_prefix(v.name));
    CHECK(++seen[v.name] == 1);
    CHECK(std::string(v.help).size() > 5);
    CHECK(std::string(v.help).find('\n') == std::string::npos);
  }
  REQUIRE(find_variable("APPENDGUARD_CARRIED_FDS"));
  CHECK(find_variable("APPENDGUARD_CARRIED_FDS")->kind == VariableKind::kInternal);
  REQUIRE(find_variable("APPENDGUARD_LIB"));
  CHECK(find_variable("APPENDGUARD_LIB")->kind == VariableKind::kTooling);
  CHECK(find_variable("APPENDGUARD_PATH") == nullptr);
}

TEST_CASE("enabled, an unknown APPENDGUARD name is an error naming it and the closest name") {
  ConfigResult r = parse_with_environment({{"APPENDGUARD", "1"}, {"APPENDGUARD_PATH", "/mnt/**"}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error.find("unknown variable APPENDGUARD_PATH='/mnt/**':") != std::string::npos);
  CHECK(r.error.find("did you mean APPENDGUARD_PATHS?") != std::string::npos);
  CHECK(r.error.find('\n') == std::string::npos);
  CHECK_FALSE(parse_with_environment({{"APPENDGUARD", "audit"}, {"APPENDGUARDX", "1"}}).ok());
}

TEST_CASE("known, internal and tooling names are accepted; other prefixes are not ours") {
  ConfigResult r = parse_with_environment({{"APPENDGUARD", "1"},
                                           {"APPENDGUARD_PATHS", "*.bin"},
                                           {"APPENDGUARD_CARRIED_FDS", ""},
                                           {"APPENDGUARD_LIB", "/x.so"},
                                           {"APPENDGUARD_TEST_BIN", "/x"},
                                           {"APPENDGUARD_SUMMARY", "0"},
                                           {"APPENDGUAR", "1"},
                                           {"APPENDONLYFS", "/bin/x"}});
  CHECK(r.ok());
  CHECK(r.notices.empty());
  CHECK_FALSE(r.config.summary);
}

TEST_CASE("inert: unknown names are no error; APPENDGUARD unset with settings present is a notice") {
  ConfigResult r = parse_with_environment({{"APPENDGUARD_PATHS", "*.bin"}, {"APPENDGUARD_PATH", "x"}});
  REQUIRE(r.ok());
  CHECK(r.config.mode == Mode::kOff);
  REQUIRE(r.notices.size() == 1);
  CHECK(r.notices[0].find("APPENDGUARD is not set") != std::string::npos);
  CHECK(r.notices[0].find("APPENDGUARD_PATH, APPENDGUARD_PATHS ignored") != std::string::npos);
  // Explicitly off, or only tooling names: nothing to say.
  CHECK(parse_with_environment({{"APPENDGUARD", "off"}, {"APPENDGUARD_PATHS", "*.bin"}}).notices.empty());
  CHECK(parse_with_environment({{"APPENDGUARD_LIB", "/x.so"}, {"APPENDGUARD_CARRIED_FDS", "1"}})
            .notices.empty());
  CHECK(parse_with_environment({}).notices.empty());
}

TEST_CASE("summary switch") {
  CHECK_FALSE(parse_with_environment({{"APPENDGUARD", "1"}}).config.summary);  // stderr: off unless asked
  CHECK(parse_with_environment({{"APPENDGUARD", "1"}, {"APPENDGUARD_LOG", "/x/%p.log"}}).config.summary);
  CHECK(parse_with_environment({{"APPENDGUARD", "1"}, {"APPENDGUARD_SUMMARY", "1"}}).config.summary);
  CHECK_FALSE(
      parse_with_environment({{"APPENDGUARD", "1"}, {"APPENDGUARD_LOG", "/x"}, {"APPENDGUARD_SUMMARY", "0"}})
          .config.summary);
  ConfigResult r = parse_with_environment({{"APPENDGUARD", "1"}, {"APPENDGUARD_SUMMARY", "maybe"}});
  CHECK(r.error ==
        "appendguard: invalid APPENDGUARD_SUMMARY='maybe': accepted: 1, on, yes, true; 0, off, no, false");
}

TEST_CASE(
    "every setting's row has a parser, and a bad value's line names it, the value and the row's accepted") {
  // A value each setting refuses; a new setting that accepts "bogus" needs its own here.
  const std::map<std::string, std::string> bad = {
      {"APPENDGUARD_PATHS", "[x"}, {"APPENDGUARD_LOG", ""}, {"APPENDGUARD_FS", "fuse rclone"}};
  // parse_config and the launcher read the mode first, as the first row.
  CHECK(std::string_view(known_variables().front().name) == "APPENDGUARD");
  for (const Variable& v : known_variables()) {
    INFO(v.name);
    if (v.kind != VariableKind::kSetting) {
      CHECK_FALSE(v.parse);
      CHECK(v.options.empty());
      continue;
    }
    REQUIRE(v.parse);
    CHECK(*v.accepted);
    const auto special = bad.find(v.name);
    const std::string value = special == bad.end() ? "bogus" : special->second;
    std::map<std::string, std::string> env = {{"APPENDGUARD", "1"}};
    env[v.name] = value;  // for APPENDGUARD itself, replaces the mode
    const ConfigResult r = parse_with_environment(env);
    CHECK(r.error.starts_with(std::string("appendguard: invalid ") + v.name + "='" + value + "': "));
    CHECK(r.error.find(std::string("accepted: ") + v.accepted) != std::string::npos);
    CHECK(r.error.find('\n') == std::string::npos);
  }
}

TEST_CASE("the APPENDGUARD* entries gathered in one pass give what getenv gives") {
  const char* environment[] = {
      "HOME=/root",         "APPENDGUARD_PATHS=*.bin", "APPENDGUARD=1", "APPENDGUARD_PATHS=x",
      "APPENDGUARD_EMPTY=", "APPENDGUARD_NOVALUE",     "PATH=/bin",     nullptr};
  OurEnvironment ours;
  ours.gather(environment);
  CHECK_FALSE(ours.overflow);
  CHECK(ours.count == 5);
  CHECK(std::string(ours.value_of("APPENDGUARD")) == "1");
  CHECK(std::string(ours.value_of("APPENDGUARD_PATHS")) == "*.bin");  // the first, as getenv's
  CHECK(std::string(ours.value_of("APPENDGUARD_EMPTY")).empty());
  CHECK(ours.value_of("APPENDGUARD_NOVALUE") == nullptr);
  CHECK(ours.value_of("APPENDGUARD_PATH") == nullptr);  // a prefix of a name is not the name
  CHECK(ours.value_of("APPENDGUARD_MODE") == nullptr);

  ours.gather(nullptr);
  CHECK(ours.count == 0);
  CHECK(ours.value_of("APPENDGUARD") == nullptr);

  std::vector<std::string> many;
  for (size_t i = 0; i <= OurEnvironment::kCapacity; ++i)
    many.push_back("APPENDGUARD_X" + std::to_string(i) + "=1");
  std::vector<const char*> pointers;
  for (const std::string& entry : many) pointers.push_back(entry.c_str());
  pointers.push_back(nullptr);
  ours.gather(pointers.data());
  CHECK(ours.overflow);  // the caller asks getenv then
}
