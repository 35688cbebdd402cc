#include <catch2/catch.hpp>

#include "cli/launch_options.h"

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
