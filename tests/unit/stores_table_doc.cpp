// Generates docs/stores.md's tables of stores from the table itself (core/stores.def) and the remedy
// function (core/store_remedy.h), between the markers <!-- stores-table:begin --> and
// <!-- stores-table:end -->.
//   appendguard_stores_table --check docs/stores.md   exit 1 when the section differs (unit.stores_table)
//   appendguard_stores_table --write docs/stores.md   rewrite the section
//   appendguard_stores_table                          print the section
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "core/store_remedy.h"
#include "core/store_table.h"

using namespace appendguard;

namespace {

constexpr std::string_view kBegin = "<!-- stores-table:begin -->";
constexpr std::string_view kEnd = "<!-- stores-table:end -->";

// "a|b" as "`a`, `b`".
std::string code_list(const char* list) {
  std::string out;
  std::string_view rest(list);
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    if (!out.empty()) out += ", ";
    out += "`" + std::string(rest.substr(0, bar)) + "`";
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return out;
}

std::string store_title(const StoreRow& row) {
  std::string title = "`" + std::string(row.name) + "`";
  if (row.opens != OpenClass::kAllOpens) title += std::string(" (") + open_class_name(row.opens) + ")";
  return title;
}

std::string recognition(const StoreRow& row) {
  std::string out;
  if (row.types[0]) out += "type " + code_list(row.types);
  if (row.sources[0]) out += (out.empty() ? "" : "; ") + std::string("source ") + code_list(row.sources);
  if (row.rclone[0]) out += (out.empty() ? "" : "; ") + std::string("cache mode ") + code_list(row.rclone);
  if (row.id == StoreId::kOther) return "any other mount";
  if (out.empty()) return "`APPENDGUARD_FS=MOUNT_POINT=" + std::string(row.name) + "`";
  return out;
}

std::string section() {
  std::ostringstream out;
  out << kBegin << "\n\n"
      << "Generated from [`src/core/stores.def`](../src/core/stores.def) and `remedy_for`\n"
      << "([`src/core/store_remedy.h`](../src/core/store_remedy.h)) by `appendguard_stores_table --write\n"
      << "docs/stores.md`; `unit.stores_table` fails when this section differs. `?`: neither documented nor\n"
      << "measured (an undocumented step is tried and the store's answer reported).\n\n"
      << "What each store accepts:\n\n"
      << "| Store | recognised by | write below end | append to existing | write open of existing | "
         "`O_TRUNC` of existing | shrink | to 0 | grow | rename | read while written | visible at | keeps "
         "old until replaced |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const StoreRow& row : store_rows()) {
    out << "| " << store_title(row) << " | " << recognition(row) << " | " << accepts_name(row.below_end)
        << " | " << accepts_name(row.append) << " | " << write_open_name(row.write_open) << " | "
        << accepts_name(row.overwrite) << " | " << accepts_name(row.shrink) << " | "
        << accepts_name(row.empty) << " | " << accepts_name(row.grow) << " | " << rename_name(row.rename)
        << " | " << accepts_name(row.reads_while_written) << " | " << visible_name(row.visible_at) << " | "
        << accepts_name(row.keeps_old) << " |\n";
  }
  out << "\nWhat the library does there (enforce mode; a file guarded by name also keeps the end-of-file "
         "rule on any store):\n\n| Store |";
  for (StoreOperation operation : store_operations()) out << " " << store_operation_name(operation) << " |";
  out << "\n|---|";
  for (size_t i = 0; i < store_operations().size(); ++i) out << "---|";
  out << "\n";
  for (const StoreRow& row : store_rows()) {
    out << "| " << store_title(row) << " |";
    for (StoreOperation operation : store_operations()) {
      const Remedy remedy = remedy_for(operation, row);
      out << " " << (remedy == Remedy::kPassOn ? "pass on" : remedy_name(remedy)) << " |";
    }
    out << "\n";
  }
  out << "\nWhere each row's facts come from:\n\n";
  for (const StoreRow& row : store_rows()) {
    out << "- " << store_title(row) << ": measured: " << (row.measured[0] ? row.measured : "nothing")
        << "; read: " << (row.read[0] ? row.read : "nothing else") << ".\n";
  }
  out << "\n" << kEnd;
  return out.str();
}

bool read_file(const char* path, std::string& text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  text = buffer.str();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string generated = section();
  if (argc == 1) {
    std::printf("%s\n", generated.c_str());
    return 0;
  }
  const bool write = argc == 3 && std::strcmp(argv[1], "--write") == 0;
  const bool check = argc == 3 && std::strcmp(argv[1], "--check") == 0;
  if (!write && !check) {
    std::fprintf(stderr, "usage: %s [--check|--write FILE]\n", argv[0]);
    return 2;
  }
  std::string text;
  if (!read_file(argv[2], text)) {
    std::fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[2]);
    return 2;
  }
  const size_t begin = text.find(kBegin);
  const size_t end = text.find(kEnd);
  if (begin == std::string::npos || end == std::string::npos || end < begin) {
    std::fprintf(stderr, "%s: %s has no %s ... %s section\n", argv[0], argv[2], kBegin.data(), kEnd.data());
    return 1;
  }
  const std::string current = text.substr(begin, end + kEnd.size() - begin);
  if (current == generated) return 0;
  if (check) {
    std::fprintf(stderr,
                 "%s: the stores table in %s differs from src/core/stores.def; run "
                 "`appendguard_stores_table --write %s` (build/tests/unit)\n",
                 argv[0], argv[2], argv[2]);
    return 1;
  }
  text.replace(begin, current.size(), generated);
  std::ofstream out(argv[2], std::ios::binary | std::ios::trunc);
  out << text;
  return out ? 0 : 1;
}
