#include <catch2/catch.hpp>

#include <cctype>
#include <set>

#include "cli/launch_options.h"
#include "core/config.h"
#include "core/variables.h"

using namespace appendguard;

namespace {

std::string value_of(const LaunchPlan& plan, const std::string& name) {
  for (const auto& [n, v] : plan.environment) {
    if (n == name) return v;
  }
  return "<unset>";
}

}  // namespace

TEST_CASE("run sets the preload library first and enforce by default") {
  LaunchParse r =
      parse_run_arguments({"--", "python3", "train.py"}, "/opt/lib/libappendguard.so", "/x/other.so");
  REQUIRE(r.ok());
  CHECK(r.plan.command == std::vector<std::string>{"python3", "train.py"});
  CHECK(value_of(r.plan, "LD_PRELOAD") == "/opt/lib/libappendguard.so:/x/other.so");
  CHECK(value_of(r.plan, "APPENDGUARD") == "enforce");
}

TEST_CASE("run keeps APPENDGUARD=audit from the environment unless --enforce says otherwise") {
  CHECK(value_of(parse_run_arguments({"--", "x"}, "/lib.so", "", "audit").plan, "APPENDGUARD") == "audit");
  CHECK(value_of(parse_run_arguments({"--enforce", "--", "x"}, "/lib.so", "", "audit").plan, "APPENDGUARD") ==
        "enforce");
  CHECK(value_of(parse_run_arguments({"--", "x"}, "/lib.so", "", "1").plan, "APPENDGUARD") == "enforce");
  CHECK(value_of(parse_run_arguments({"--", "x"}, "/lib.so", "", "0").plan, "APPENDGUARD") == "enforce");
}

TEST_CASE("options map to variables, with or without '='") {
  LaunchParse r = parse_run_arguments({"--audit", "--trace", "--paths", "*.bin", "--log=/tmp/ag-%p.log",
                                       "--on-violation", "abort", "--errno=EPERM", "--backtrace", "4",
                                       "--no-python-stack", "--reopen=rewrite", "torchrun", "--nproc", "2"},
                                      "/lib.so", "");
  REQUIRE(r.ok());
  CHECK(value_of(r.plan, "APPENDGUARD") == "audit");
  CHECK(value_of(r.plan, "APPENDGUARD_TRACE") == "1");
  CHECK(value_of(r.plan, "APPENDGUARD_PATHS") == "*.bin");
  CHECK(value_of(r.plan, "APPENDGUARD_LOG") == "/tmp/ag-%p.log");
  CHECK(value_of(r.plan, "APPENDGUARD_ON_VIOLATION") == "abort");
  CHECK(value_of(r.plan, "APPENDGUARD_ERRNO") == "EPERM");
  CHECK(value_of(r.plan, "APPENDGUARD_BACKTRACE") == "4");
  CHECK(value_of(r.plan, "APPENDGUARD_PYTHON_STACK") == "0");
  CHECK(value_of(r.plan, "APPENDGUARD_REOPEN") == "rewrite");
  CHECK(value_of(r.plan, "LD_PRELOAD") == "/lib.so");
  CHECK(r.plan.command == std::vector<std::string>{"torchrun", "--nproc", "2"});
}

TEST_CASE("bad command lines") {
  CHECK_FALSE(parse_run_arguments({}, "/lib.so", "").ok());
  CHECK_FALSE(parse_run_arguments({"--"}, "/lib.so", "").ok());
  CHECK_FALSE(parse_run_arguments({"--paths"}, "/lib.so", "").ok());
  LaunchParse r = parse_run_arguments({"--strict", "--", "x"}, "/lib.so", "");
  CHECK(r.error.find("unknown option '--strict'") != std::string::npos);
  CHECK(r.error.find('\n') == std::string::npos);
}

TEST_CASE("run refuses an invalid APPENDGUARD in the environment instead of replacing it") {
  LaunchParse r = parse_run_arguments({"--", "x"}, "/lib.so", "", "enforced");
  CHECK_FALSE(r.ok());
  CHECK(r.error.find("APPENDGUARD='enforced'") != std::string::npos);
  for (const char* ok : {"", "0", "off", "1", "on", "enforce", "audit"}) {
    CHECK(parse_run_arguments({"--", "x"}, "/lib.so", "", ok).ok());
  }
}

TEST_CASE("every option of the variables table sets its variable, as --OPTION V and --OPTION=V") {
  size_t options = 0;
  for (const Variable& v : known_variables()) {
    for (const LaunchOption& o : v.options) {
      ++options;
      INFO(o.name);
      CHECK(v.kind == VariableKind::kSetting);
      CHECK(*o.help);
      if (o.argument) {
        CHECK(value_of(parse_run_arguments({o.name, "V", "--", "x"}, "/lib.so", "").plan, v.name) == "V");
        CHECK(value_of(parse_run_arguments({std::string(o.name) + "=V", "x"}, "/lib.so", "").plan, v.name) ==
              "V");
        CHECK_FALSE(parse_run_arguments({o.name}, "/lib.so", "").ok());
      } else {
        REQUIRE(o.sets);
        CHECK(value_of(parse_run_arguments({o.name, "--", "x"}, "/lib.so", "").plan, v.name) == o.sets);
        CHECK_FALSE(parse_run_arguments({std::string(o.name) + "=1", "x"}, "/lib.so", "").ok());
        // The switch's value is one the variable's parser accepts.
        Config config;
        CHECK(v.parse(o.sets, v, config).empty());
      }
      const std::string unknown = parse_run_arguments({"--nonsense", "x"}, "/lib.so", "").error;
      CHECK(unknown.find(o.name) != std::string::npos);
      CHECK(run_usage().find(std::string("  ") + o.name) != std::string::npos);
    }
  }
  CHECK(options >= 10);
}

TEST_CASE("the mode's options come from the table: --audit and --enforce set APPENDGUARD, the last wins") {
  CHECK(value_of(parse_run_arguments({"--audit", "--", "x"}, "/lib.so", "").plan, "APPENDGUARD") == "audit");
  CHECK(value_of(parse_run_arguments({"--audit", "--enforce", "x"}, "/lib.so", "", "audit").plan,
                 "APPENDGUARD") == "enforce");
  CHECK(value_of(parse_run_arguments({"--", "x"}, "/lib.so", "", "audit").plan, "APPENDGUARD") == "audit");
  // APPENDGUARD appears once in the plan, whatever the options.
  LaunchPlan plan = parse_run_arguments({"--audit", "--enforce", "--audit", "x"}, "/lib.so", "").plan;
  size_t count = 0;
  for (const auto& [name, value] : plan.environment) count += name == "APPENDGUARD";
  CHECK(count == 1);
}

TEST_CASE("run --help lists exactly the table's names, with each setting's accepted values and default") {
  const std::string usage = run_usage();
  std::set<std::string> listed;
  for (size_t at = usage.find("APPENDGUARD"); at != std::string::npos; at = usage.find("APPENDGUARD", at)) {
    size_t end = at;
    while (end < usage.size() &&
           (std::isupper(static_cast<unsigned char>(usage[end])) ||
            std::isdigit(static_cast<unsigned char>(usage[end])) || usage[end] == '_')) {
      ++end;
    }
    const std::string name = usage.substr(at, end - at);
    if (name.back() != '_') listed.insert(name);  // "APPENDGUARD_*" is prose
    at = end;
  }
  std::set<std::string> table;
  for (const Variable& v : known_variables()) {
    table.insert(v.name);
    if (v.kind != VariableKind::kSetting) continue;
    CHECK(usage.find(std::string("accepted: ") + v.accepted) != std::string::npos);
    if (*v.default_value) CHECK(usage.find(std::string("default ") + v.default_value) != std::string::npos);
  }
  CHECK(listed == table);
}
