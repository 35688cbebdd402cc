#include <catch2/catch.hpp>

#include "cli/report_summary.h"

using namespace appendguard;

TEST_CASE("violations are grouped by operation and file, in order of first appearance") {
  const char* log =
      "unrelated output\n"
      "appendguard: violation: write \"/ckpt/a b.safetensors\" fd=3 bytes=5 offset=0 end_of_file=9: refused "
      "(EOPNOTSUPP)\n"
      "  why: the position is not the end of file\n"
      "  native stack:\n"
      "appendguard: violation: ftruncate /ckpt/c.safetensors fd=4 offset=0 end_of_file=9: refused "
      "(EOPNOTSUPP)\n"
      "  why: changes the size\n"
      "appendguard: violation: write \"/ckpt/a b.safetensors\" fd=5 bytes=1 offset=1 end_of_file=9: refused "
      "(EOPNOTSUPP)\n"
      "  why: a different why that must not replace the first\n"
      "appendguard: violation: malformed line without descriptor\n";
  std::vector<ViolationGroup> groups;
  collect_violations(log, groups);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].operation == "write");
  CHECK(groups[0].path == "/ckpt/a b.safetensors");
  CHECK(groups[0].count == 2);
  CHECK(groups[0].why == "the position is not the end of file");
  CHECK(groups[0].first_line.find("fd=3") != std::string::npos);
  CHECK(groups[1].operation == "ftruncate");
  CHECK(groups[1].count == 1);
  CHECK(groups[1].why == "changes the size");
  collect_violations("appendguard: violation: ftruncate /ckpt/c.safetensors fd=9 offset=0\n", groups);
  CHECK(groups[1].count == 2);
  std::vector<ViolationGroup> none;
  collect_violations("", none);
  CHECK(none.empty());
}
