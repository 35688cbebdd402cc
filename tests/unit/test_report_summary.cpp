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

TEST_CASE("audit findings enforce mode fixes, and the ranks of a group") {
  const char* log =
      "appendguard: violation: open64 /c/x.safetensors fd=3 end_of_file=5: allowed (audit mode): this would "
      "fail on an append-only mount; fixed by enforce mode; pid 7 rank 3 host h\n"
      "appendguard: violation: write /c/x.safetensors fd=3 bytes=1 offset=0 end_of_file=5: allowed (audit "
      "mode): this would fail on an append-only mount; needs a code change; pid 7 rank 3 host h\n"
      "appendguard: violation: write /c/x.safetensors fd=3 bytes=1 offset=0 end_of_file=5: allowed (audit "
      "mode): this would fail on an append-only mount; needs a code change; pid 9 rank 12 host g\n"
      "appendguard: violation: write /c/x.safetensors fd=3 bytes=1 offset=0 end_of_file=5: allowed (audit "
      "mode): this would fail on an append-only mount; needs a code change; pid 8 rank 3 host h\n";
  std::vector<ViolationGroup> groups;
  collect_violations(log, groups);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].fixed_by_enforce);
  CHECK_FALSE(groups[1].fixed_by_enforce);
  CHECK(groups[1].count == 3);
  CHECK(groups[1].ranks == std::vector<std::string>{"3", "12"});
}

TEST_CASE("reports are grouped by call site across ranks and files") {
  auto report = [](const char* file, const char* rank, const char* python_frame) {
    std::string r = std::string("appendguard: violation: write /c/") + file +
                    " fd=3 bytes=1 offset=0 end_of_file=5: refused (EOPNOTSUPP); pid 7 rank " + rank +
                    " host h\n" +
                    "  why: the position is not the end of file\n"
                    "  native stack:\n"
                    "    #0  0x0000004011aa write+0x1a (libc.so.6+0x1011aa)\n"
                    "    #1  0x0000004022bb _Py_write+0x5e (python3+0x22bb)\n";
    if (python_frame)
      r += std::string("  python stack (most recent call first):\n    ") + python_frame + "\n";
    r += "  opened at:\n    #0  0x000000403333 open_site+0x1 (python3+0x3333)\n";
    return r;
  };
  std::string log = report("a-0.safetensors", "0", "File \"/app/save.py\", line 8, in patch") +
                    report("a-1.safetensors", "1", "File \"/app/save.py\", line 8, in patch") +
                    report("a-2.safetensors", "2", "File \"/app/save.py\", line 9, in other") +
                    report("b.safetensors", "3", nullptr);
  std::vector<ViolationGroup> groups;
  collect_violations(log, groups, "rank.log");
  REQUIRE(groups.size() == 3);
  CHECK(groups[0].site == "File \"/app/save.py\", line 8, in patch");
  CHECK(groups[0].count == 2);
  CHECK(groups[0].files == 2);
  CHECK(groups[0].ranks == std::vector<std::string>{"0", "1"});
  CHECK(groups[0].first_log == "rank.log");
  CHECK(groups[0].why == "the position is not the end of file");
  CHECK(groups[1].site == "File \"/app/save.py\", line 9, in other");
  CHECK(groups[2].site == "_Py_write+0x5e (python3+0x22bb)");  // libc's frame skipped, not the open site
}

TEST_CASE("JSON reports (APPENDGUARD_FORMAT=json) are grouped with text reports of the same call site") {
  const std::string text_report =
      "appendguard: violation: write /c/a-0.safetensors fd=3 bytes=1 offset=0 end_of_file=5: refused "
      "(EOPNOTSUPP); pid 7 rank 0 host h\n"
      "  why: the position is not the end of file\n"
      "  native stack:\n"
      "    #0  0x0000004011aa write+0x1a (libc.so.6+0x1011aa)\n"
      "    #1  0x0000004022bb save_header+0x5e (app+0x22bb)\n";
  const std::string json_report =
      R"j({"type":"violation","operation":"write","path":"/c/a\n-1.safetensors","fd":4,"bytes":1,)j"
      R"j("offset":0,"end_of_file":5,"outcome":"refused","errno":"EOPNOTSUPP","why":"the position is not )j"
      R"j(the end of file","opened":{"function":"open64","pid":9,"tid":9},"pid":9,"tid":9,"rank":"1",)j"
      R"j("host":"h2","native_stack":["#0  0x0000004011aa write+0x1a (libc.so.6+0x1011aa)",)j"
      R"j("#1  0x0000004022bb save_header+0x5e (app+0x22bb)"]})j"
      "\n";
  const std::string json_audit_open =
      R"j({"type":"violation","operation":"open64","path":"/c/b.safetensors","fd":5,"outcome":"audit",)j"
      R"j("finding":"fixed by enforce mode","why":"read-write open","pid":9,"tid":9,"rank":"1","host":"h2"})j"
      "\n";
  const std::string not_reports = R"j({"type":"trace","pid":9,"operation":"write","path":"/c/x"})j"
                                  "\n"
                                  R"j({"type":"violation","path":)j"
                                  "\n{broken\n";
  std::vector<ViolationGroup> groups;
  collect_violations(text_report, groups, "rank0.log");
  collect_violations(json_report + json_audit_open + not_reports, groups, "rank1.log");
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].site == "save_header+0x5e (app+0x22bb)");
  CHECK(groups[0].count == 2);
  CHECK(groups[0].files == 2);
  CHECK(groups[0].ranks == std::vector<std::string>{"0", "1"});
  CHECK(groups[0].first_log == "rank0.log");
  CHECK(groups[1].operation == "open64");
  CHECK(groups[1].path == "/c/b.safetensors");
  CHECK(groups[1].fixed_by_enforce);
  CHECK(groups[1].why == "read-write open");
  CHECK(groups[1].first_log == "rank1.log");
  CHECK(groups[1].first_line ==
        "appendguard: violation: open64 \"/c/b.safetensors\" fd=5: audit; pid 9 rank 1 host h2");

  // A path is decoded for grouping and shown as the log wrote it (escaped).
  std::vector<ViolationGroup> json_only;
  collect_violations(json_report, json_only);
  REQUIRE(json_only.size() == 1);
  CHECK(json_only[0].path == "/c/a\n-1.safetensors");
  CHECK(json_only[0].shown_path == "\"/c/a\\n-1.safetensors\"");
}
