#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/file_table.h"

using namespace appendguard;

namespace {

OpenRecord record(const char* path, ino_t inode, uint64_t size) {
  OpenRecord r;
  r.path = path;
  r.device = 1;
  r.inode = inode;
  r.size = size;
  r.kernel_appends = true;
  return r;
}

}  // namespace

TEST_CASE("track, alias, forget") {
  auto table = std::make_unique<FileTable>();
  CHECK(table->lookup(3) == nullptr);
  CHECK_FALSE(table->any_tracked());
  Description* d = table->track(3, record("/a", 7, 100));
  REQUIRE(d != nullptr);
  CHECK(table->lookup(3) == d);
  CHECK(d->file->end_of_file == 100);
  CHECK(std::string(d->path) == "/a");
  table->alias(3, 9);
  CHECK(table->lookup(9) == d);
  CHECK(table->forget(3));
  CHECK(table->lookup(3) == nullptr);
  CHECK(table->lookup(9) == d);  // the dup keeps the description alive
  CHECK(table->forget(9));
  CHECK_FALSE(table->forget(9));
}

TEST_CASE("two opens of one file share its end; a truncating open resets it") {
  auto table = std::make_unique<FileTable>();
  Description* a = table->track(3, record("/a", 7, 100));
  a->file->end_of_file = 150;  // bytes this process wrote that the filesystem does not show yet
  Description* b = table->track(4, record("/a", 7, 100));
  CHECK(a != b);
  CHECK(a->file == b->file);
  CHECK(b->file->end_of_file == 150);
  OpenRecord truncating = record("/a", 7, 0);
  truncating.truncated = true;
  Description* c = table->track(5, truncating);
  CHECK(c->file->end_of_file == 0);
  uint64_t end = 1;
  CHECK(table->end_of_file_of(1, 7, end));
  CHECK(end == 0);
  table->set_end_of_file(1, 7, 42);
  CHECK(a->file->end_of_file == 42);
}

TEST_CASE("alias onto a tracked fd drops what it had; alias from untracked clears it") {
  auto table = std::make_unique<FileTable>();
  Description* a = table->track(3, record("/a", 1, 0));
  Description* b = table->track(4, record("/b", 2, 0));
  table->alias(3, 4);
  CHECK(table->lookup(4) == a);
  (void)b;
  table->alias(10, 4);  // dup2(untracked, 4)
  CHECK(table->lookup(4) == nullptr);
}

TEST_CASE("forget_range and recycling") {
  auto table = std::make_unique<FileTable>();
  for (int fd = 3; fd < 10; ++fd) table->track(fd, record("/f", static_cast<ino_t>(fd), 0));
  CHECK(table->highest_fd() == 9);
  table->forget_range(5, ~0u);
  CHECK(table->lookup(4) != nullptr);
  CHECK(table->lookup(5) == nullptr);
  CHECK(table->lookup(9) == nullptr);
  Description* again = table->track(5, record("/g", 50, 3));
  REQUIRE(again != nullptr);
  CHECK(again->position == 0);
  CHECK(again->file->end_of_file == 3);
  CHECK(table->track(kMaxTrackedFd, record("/h", 60, 0)) == nullptr);
  CHECK(table->lookup(-1) == nullptr);
}

TEST_CASE("a seek site is recorded when a seek leaves the end, and only then") {
  using A = SeekSiteAction;
  CHECK(seek_site_action(100, 0, 100, false) == A::kRecord);    // seek(0) from the end
  CHECK(seek_site_action(100, 0, 100, true) == A::kRecord);     // again, after a seek back to the end
  CHECK(seek_site_action(100, 150, 100, false) == A::kRecord);  // beyond the end is not the end either
  CHECK(seek_site_action(0, 10, 100, true) == A::kNone);        // still away: the first site stays
  CHECK(seek_site_action(0, 10, 100, false) == A::kRecord);     // the open did not start at the end
  CHECK(seek_site_action(100, 100, 100, false) == A::kNone);    // a tell at the end, a seek to the end
  CHECK(seek_site_action(10, 10, 100, false) == A::kNone);      // a tell away from the end
  CHECK(seek_site_action(10, 100, 100, true) == A::kForget);    // back at the end: a write there is fine
  CHECK(seek_site_action(10, 100, 100, false) == A::kNone);
}

TEST_CASE("a recycled description starts without a seek site") {
  auto table = std::make_unique<FileTable>();
  Description* d = table->track(3, record("/s", 70, 100));
  REQUIRE(d != nullptr);
  CHECK(d->seek_site() == nullptr);  // made only by a seek that records one
  CHECK_FALSE(d->seek_site_recorded());
  SeekSite* site = d->seek_site_for_recording();
  REQUIRE(site != nullptr);
  CHECK(d->seek_site_for_recording() == site);
  site->recorded.store(true);
  CHECK(d->seek_site_recorded());
  CHECK(table->forget(3));
  Description* again = table->track(4, record("/t", 71, 0));
  REQUIRE(again == d);  // the pool gave the same memory back
  CHECK_FALSE(again->seek_site_recorded());
  CHECK(again->seek_site() == nullptr);  // the old one was unmapped with the description
}

TEST_CASE("a description's path is in a buffer sized to it, given back with the description") {
  auto table = std::make_unique<FileTable>();
  Description* d = table->track(3, record("/short", 70, 0));
  REQUIRE(d != nullptr);
  CHECK(std::string(d->path) == "/short");
  CHECK(d->path_class == kInlinePathClass);  // in the description itself: one pool object for both
  CHECK(d->path == d->short_path);
  CHECK(table->forget(3));
  CHECK(std::string(d->path).empty());  // a recycled description points at no buffer
  std::string longer(300, 'x');
  longer[0] = '/';
  Description* again = table->track(4, record(longer.c_str(), 71, 0));
  REQUIRE(again != nullptr);
  CHECK(std::string(again->path) == longer);
  CHECK(again->path_class == 2);  // 512 bytes
  const char* buffer = again->path;
  CHECK(table->forget(4));
  std::string other(400, 'z');
  Description* third = table->track(5, record(other.c_str(), 72, 0));
  REQUIRE(third != nullptr);
  CHECK(std::string(third->path) == other);
  CHECK(third->path == buffer);  // the 512-byte buffer given back at the second forget
  std::string longest(kMaxPath + 10, 'y');
  Description* fourth = table->track(6, record(longest.c_str(), 73, 0));
  REQUIRE(fourth != nullptr);
  CHECK(std::string(fourth->path) == longest.substr(0, kMaxPath - 1));
  CHECK(fourth->path_class == 5);  // 4 KiB
}

TEST_CASE("a path fits in the description up to kShortPath - 1 characters, its last byte left NUL") {
  auto table = std::make_unique<FileTable>();
  std::string fits(kShortPath - 1, 'a');
  fits[0] = '/';
  Description* d = table->track(3, record(fits.c_str(), 80, 0));
  REQUIRE(d != nullptr);
  CHECK(d->path == d->short_path);
  CHECK(std::string(d->path) == fits);
  CHECK(d->path_length == kShortPath - 1);
  CHECK(d->short_path[kShortPath - 1] == '\0');
  std::string one_more(kShortPath, 'b');
  one_more[0] = '/';
  Description* e = table->track(4, record(one_more.c_str(), 81, 0));
  REQUIRE(e != nullptr);
  CHECK(e->path != e->short_path);
  CHECK(e->path_class == 0);  // 128 bytes
  CHECK(std::string(e->path) == one_more);
  // Recycled and reused for a shorter path: the inline buffer holds it, and no pool buffer stays taken.
  CHECK(table->forget(4));
  CHECK(table->forget(3));
  Description* f = table->track(5, record("/x", 82, 0));
  REQUIRE(f != nullptr);
  CHECK(std::string(f->path) == "/x");
  CHECK(f->path == f->short_path);
  CHECK(table->descriptions_in_use() == 1);
}

TEST_CASE("a number the program closed that a held session keeps: a taken slot that lookup does not see") {
  auto table = std::make_unique<FileTable>();
  Description* d = table->track(5, record("/held", 11, 10));
  REQUIRE(d != nullptr);
  table->close_for_program(5);
  CHECK(table->slot(5) == closed_by_program());
  CHECK(table->closed_by_program_at(5));
  CHECK(table->lookup(5) == nullptr);  // no description: nothing dereferences the mark
  // The reopen answered with the held descriptor replaces the mark with its description.
  Description* again = table->track(5, record("/held", 11, 10));
  REQUIRE(again != nullptr);
  CHECK(table->lookup(5) == again);
  table->close_for_program(5);
  // The real close clears it, unless the number was given to a new description meanwhile.
  table->clear_closed_by_program(5);
  CHECK(table->slot(5) == nullptr);
  table->close_for_program(5);
  Description* other = table->track(5, record("/other", 12, 0));
  table->clear_closed_by_program(5);
  CHECK(table->lookup(5) == other);
  // forget, alias and forget_range drop a mark without releasing anything.
  table->close_for_program(6);
  CHECK_FALSE(table->forget(6));
  CHECK(table->slot(6) == nullptr);
  table->close_for_program(7);
  table->alias(5, 7);
  CHECK(table->lookup(7) == other);
  table->close_for_program(8);
  table->forget_range(8, 8);
  CHECK(table->slot(8) == nullptr);
  CHECK(table->forget(5));
  CHECK(table->forget(7));
}

TEST_CASE("write totals add up the files released and the files still open, and a fork child starts at 0") {
  auto table = std::make_unique<FileTable>();
  Description* a = table->track(3, record("/a", 81, 0));
  Description* b = table->track(4, record("/b", 82, 0));
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  a->file->count_write(10);
  a->file->count_write(20);
  b->file->count_write(5);
  WriteTotals totals = table->write_totals();
  CHECK(totals.writes == 3);
  CHECK(totals.bytes == 35);
  CHECK(table->forget(3));  // /a released: its counts are kept by the table
  totals = table->write_totals();
  CHECK(totals.writes == 3);
  CHECK(totals.bytes == 35);
  Description* again = table->track(5, record("/c", 83, 0));  // may recycle /a's file record
  REQUIRE(again != nullptr);
  CHECK(again->file->writes == 0);
  again->file->count_write(1);
  totals = table->write_totals();
  CHECK(totals.writes == 4);
  CHECK(totals.bytes == 36);
  table->before_fork();
  table->after_fork_child();
  totals = table->write_totals();
  CHECK(totals.writes == 0);
  CHECK(totals.bytes == 0);
}

TEST_CASE("files are found by device and inode among thousands, and forgotten in any order") {
  // Issue 27: the live files are indexed by identity (open addressing, linear probing); an index that lost
  // an entry when another was removed would give a second TrackedFile (another end of file) for one file.
  auto table = std::make_unique<FileTable>();
  constexpr int kFiles = 3000;
  std::vector<TrackedFile*> files(kFiles);
  for (int i = 0; i < kFiles; ++i) {
    OpenRecord r = record("/f", static_cast<ino_t>(i * 64 + 5), 0);  // inodes far apart and close together
    r.device = static_cast<dev_t>(1 + i % 3);
    Description* d = table->track(10 + i, r);
    REQUIRE(d != nullptr);
    files[i] = d->file;
  }
  auto identity = [](int i) { return std::pair<dev_t, ino_t>(static_cast<dev_t>(1 + i % 3), i * 64 + 5); };
  // Forget every third (from the middle outwards), then check every file is still found as itself.
  for (int i = kFiles / 2; i < kFiles; i += 3) CHECK(table->forget(10 + i));
  for (int i = kFiles / 2 - 3; i >= 0; i -= 3) CHECK(table->forget(10 + i));
  for (int i = 0; i < kFiles; ++i) {
    auto [device, inode] = identity(i);
    bool forgotten = (i - kFiles / 2) % 3 == 0;
    CAPTURE(i);
    CHECK(table->tracks_file(device, inode) == !forgotten);
    if (forgotten) continue;
    OpenRecord again = record("/f", inode, 0);
    again.device = device;
    Description* d = table->track(10 + kFiles + i, again);
    REQUIRE(d != nullptr);
    CHECK(d->file == files[i]);  // the same file, found by identity
    CHECK(table->forget(10 + kFiles + i));
  }
  for (int i = 0; i < kFiles; ++i) table->forget(10 + i);
  CHECK_FALSE(table->tracks_file(1, 5));
  CHECK_FALSE(table->any_live_file());
}

namespace {
std::vector<bool> g_live_calls;
std::vector<bool> g_live_calls_by_owner;
void note_live_files(bool any, bool by_owner) {
  g_live_calls.push_back(any);
  g_live_calls_by_owner.push_back(by_owner);
}
}  // namespace

TEST_CASE("the live-files callback runs for every new description, a second one of a tracked file too") {
  // The raw-system-call layer sets the opening thread's selector from it (shim/syscall_dispatch.cpp): a
  // thread that opens a file another thread has open must be told as well.
  auto table = std::make_unique<FileTable>();
  g_live_calls.clear();
  table->on_live_files_changed(note_live_files);
  table->track(3, record("/a", 7, 0));
  table->track(4, record("/a", 7, 0));  // the same file: a second description
  CHECK(g_live_calls == std::vector<bool>{true, true});
  table->alias(4, 5);  // a dup is no new description
  CHECK(g_live_calls.size() == 2);
  CHECK(table->forget(3));
  CHECK(table->forget(4));
  CHECK(g_live_calls.size() == 2);  // the file is still open through 5
  CHECK(table->forget(5));
  CHECK(g_live_calls == std::vector<bool>{true, true, false});
}

TEST_CASE("the live-files callback is told a release made by forget is the owner's, and no other one") {
  // forget is called only by the owning process (note_close checks it), so the callback's owner check
  // (a getpid) is not made again for it; any other release (close_range's forget_range, an unpin) asks.
  auto table = std::make_unique<FileTable>();
  g_live_calls.clear();
  g_live_calls_by_owner.clear();
  table->on_live_files_changed(note_live_files);
  table->track(3, record("/a", 7, 0));
  CHECK(table->forget(3));
  table->track(4, record("/b", 8, 0));
  table->forget_range(0, 10);
  CHECK(g_live_calls == std::vector<bool>{true, false, true, false});
  CHECK(g_live_calls_by_owner == std::vector<bool>{false, true, false, false});
  table->track(5, record("/c", 9, 0));
  Description* d = table->lookup(5);
  REQUIRE(table->pin(d));
  CHECK(table->forget(5));  // pinned: recycled by the unpin, not by forget
  table->unpin(d);
  CHECK(g_live_calls_by_owner.back() == false);
  CHECK(g_live_calls.back() == false);
}

TEST_CASE("a scan of the table visits the groups of 64 numbers that held records, not every number below") {
  // Issue 27: 5,000 unguarded descriptors below one guarded one made every fork's and exec's scan walk
  // 5,000 empty slots.
  auto table = std::make_unique<FileTable>();
  table->track(5006, record("/g", 9, 0));
  table->track(3, record("/h", 10, 0));
  const int highest = table->highest_fd();
  REQUIRE(highest == 5006);
  std::vector<int> found;
  int visited = 0;
  for (int fd = table->next_slot(0, highest); fd <= highest; fd = table->next_slot(fd + 1, highest)) {
    ++visited;
    if (table->lookup(fd)) found.push_back(fd);
  }
  CHECK(found == std::vector<int>{3, 5006});
  CHECK(visited <= 128);  // the groups of 0-63 and 4992-5055 (up to 5006)
  table->forget(5006);
  table->track(70000, record("/i", 11, 0));  // a mapped chunk
  const int now = table->highest_fd();
  found.clear();
  for (int fd = table->next_slot(0, now); fd <= now; fd = table->next_slot(fd + 1, now)) {
    if (table->lookup(fd)) found.push_back(fd);
  }
  CHECK(found == std::vector<int>{3, 70000});
  CHECK(table->next_slot(71000, 80000) == 80001);
  CHECK(table->next_slot(70001, 70001) == 70001);  // in a used group: each number is returned
  table->forget_range(0, 100000);
  CHECK(table->lookup(3) == nullptr);
  CHECK(table->lookup(70000) == nullptr);
}

TEST_CASE("the memory of 10,000 files is given back when they are closed") {
  // Issue 27: descriptions, files and paths were recycled through free lists and never returned: a process
  // that once had 10,000 files open kept their 5 MB. Now every page whose objects are all free goes back.
  auto table = std::make_unique<FileTable>();
  const size_t before = table->pool_pages();
  constexpr int kFiles = 10000;
  for (int i = 0; i < kFiles; ++i)
    REQUIRE(table->track(10 + i, record("/a/path/of/about/forty/bytes.bin", 100 + i, 0)));
  const size_t open = table->pool_pages();
  CHECK(open > before + kFiles / 20);  // 11 descriptions a page (their short paths inside), 46 files
  CHECK(table->descriptions_in_use() == kFiles);
  for (int i = 0; i < kFiles; i += 2) CHECK(table->forget(10 + i));
  for (int i = kFiles - 1; i > 0; i -= 2) CHECK(table->forget(10 + i));
  CHECK(table->descriptions_in_use() == 0);
  CAPTURE(before, open, table->pool_pages());
  // Left: each slab's bookkeeping page and at most two empty pages per pool.
  CHECK(table->pool_pages() <= before + 40);
  // And again: the same memory serves the next files.
  for (int i = 0; i < kFiles; ++i) REQUIRE(table->track(10 + i, record("/b", 100 + i, 0)));
  CHECK(table->pool_pages() <= open);
  for (int i = 0; i < kFiles; ++i) CHECK(table->forget(10 + i));
}

TEST_CASE("a stale pointer to a description whose page was returned reads zeros and cannot be pinned") {
  // What a reader racing a close holds (core/page_pool.h): the page stays mapped, reads as zeros, and a
  // zeroed description has no references, so a guarded call's pin fails and it touches nothing else.
  auto table = std::make_unique<FileTable>();
  constexpr int kFiles = 11 * 40;  // 11 descriptions to a page: 40 pages
  std::vector<Description*> descriptions;
  for (int i = 0; i < kFiles; ++i) {
    Description* d = table->track(10 + i, record("/stale", 500 + i, 0));
    REQUIRE(d != nullptr);
    descriptions.push_back(d);
  }
  for (int i = 0; i < kFiles; ++i) REQUIRE(table->forget(10 + i));
  size_t zeroed = 0;
  for (Description* d : descriptions) {
    CHECK_FALSE(table->pin(d));
    if (d->file == nullptr && d->path == nullptr) ++zeroed;
  }
  CHECK(zeroed > kFiles / 2);  // most pages went back (a few are kept, with the last objects given back)
}

TEST_CASE("a path whose length the caller knows is copied by that length, not measured again") {
  // Issue 27: decide_open knows the full path's length; the table copies that many bytes.
  auto table = std::make_unique<FileTable>();
  OpenRecord known = record("/data/model.safetensors", 11, 0);
  known.path_length = 23;
  Description* d = table->track(3, known);
  REQUIRE(d != nullptr);
  CHECK(std::string(d->path) == "/data/model.safetensors");
  OpenRecord shorter = record("/data/model.safetensors", 12, 0);
  shorter.path_length = 5;  // what the caller says is taken, up to its NUL
  Description* e = table->track(4, shorter);
  REQUIRE(e != nullptr);
  CHECK(std::string(e->path) == "/data");
  Description* f = table->track(5, record("/data/x.bin", 13, 0));  // 0: measured
  REQUIRE(f != nullptr);
  CHECK(std::string(f->path) == "/data/x.bin");
}

TEST_CASE("a reserved description is the caller's until track_reserved publishes it, complete") {
  // Issue 27: a guarded open writes its record and captures its site's frames straight into the
  // description (shim/guard_open.cpp finish_open) rather than into a record that track copies.
  auto table = std::make_unique<FileTable>();
  Description* d = table->reserve_description();
  REQUIRE(d != nullptr);
  CHECK(d->refs.load() == 0);  // no slot refers to it, and nothing can pin it
  CHECK(table->descriptions_in_use() == 1);
  d->position = 5;
  d->program_appends = true;
  d->kernel_appends = true;
  d->readable_by_program = false;
  d->shares_offset.store(false);
  d->starts_session = true;
  d->reused_session = false;
  d->store_renames = StoreRenames::kNo;
  d->site = OpenSite{};
  d->site.function = "open64";
  d->site.frame_count = 2;
  d->site.frames[0] = &table;
  d->site.frames[1] = d;
  CHECK(table->slot(3) == nullptr);  // filled, not yet visible
  OpenedFile opened;
  opened.path = "/r";
  opened.device = 1;
  opened.inode = 40;
  opened.size = 9;
  REQUIRE(table->track_reserved(3, d, opened) == d);
  CHECK(table->lookup(3) == d);
  CHECK(d->refs.load() == 1);
  CHECK(d->descriptors == 1);
  CHECK(d->file->end_of_file == 9);
  CHECK(std::string(d->path) == "/r");
  CHECK(d->position == 5);
  CHECK(d->starts_session);
  CHECK(d->store_renames == StoreRenames::kNo);
  CHECK(std::string(d->site.function) == "open64");
  CHECK(d->site.frames[1] == d);
  // The next open's description was put aside under that lock: reserving it takes no allocation.
  CHECK(table->descriptions_in_use() == 2);
  Description* next = table->reserve_description();
  REQUIRE(next != nullptr);
  CHECK(next != d);
  CHECK(table->descriptions_in_use() == 2);
  // A second description of the same file: a truncating open sets its end, as track does.
  next->position = 0;
  next->program_appends = next->kernel_appends = next->readable_by_program = false;
  next->shares_offset.store(false);
  next->starts_session = next->reused_session = false;
  next->store_renames = StoreRenames::kUnknown;
  next->site = OpenSite{};
  opened.size = 0;
  opened.truncated = true;
  REQUIRE(table->track_reserved(4, next, opened) == next);
  CHECK(next->file == d->file);
  CHECK(d->file->end_of_file == 0);
  // Out of range: the reserved description is taken back, and nothing is published.
  Description* out = table->reserve_description();
  REQUIRE(out != nullptr);
  const size_t in_use = table->descriptions_in_use();
  CHECK(table->track_reserved(kMaxTrackedFd, out, opened) == nullptr);
  CHECK(table->descriptions_in_use() == in_use - 1);
  CHECK(table->forget(3));
  CHECK(table->forget(4));
  CHECK_FALSE(table->tracks_file(1, 40));
}
