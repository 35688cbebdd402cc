#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <cerrno>

#include "core/eof_rule.h"

using namespace appendguard;

namespace {

PositionState rewritten(uint64_t position, uint64_t end) {
  return {position, end, false, true};
}
WriteRequest at_position(uint64_t n) {
  return {n, false, 0, false, false};
}
WriteRequest at_offset(uint64_t n, uint64_t offset) {
  return {n, true, offset, false, false};
}

}  // namespace

TEST_CASE("a write at the end is allowed and advances position and end") {
  PositionState s = rewritten(100, 100);
  WriteCheck c = check_write(s, at_position(10), true);
  CHECK(c.verdict == WriteVerdict::kAllowed);
  CHECK(c.landing_offset == 100);
  apply_write(s, at_position(10), c.landing_offset, 10);
  CHECK(s.position == 110);
  CHECK(s.end_of_file == 110);
}

TEST_CASE("after a failed read of a handle made write-only, every write is refused, even at the end") {
  PositionState s = rewritten(100, 100);
  s.read_failed = true;
  CHECK(check_write(s, at_position(10), true).verdict == WriteVerdict::kAfterFailedRead);
  CHECK(check_write(s, at_offset(10, 100), true).verdict == WriteVerdict::kAfterFailedRead);
  CHECK(check_write(s, at_offset(10, 0), true).verdict == WriteVerdict::kAfterFailedRead);
  CHECK(check_write(s, at_position(0), true).verdict == WriteVerdict::kAllowed);  // nothing written
  s.read_failed = false;
  CHECK(check_write(s, at_position(10), true).verdict == WriteVerdict::kAllowed);
}

TEST_CASE("a short write advances by what was written") {
  PositionState s = rewritten(0, 0);
  apply_write(s, at_position(10), 0, 3);
  CHECK(s.position == 3);
  CHECK(s.end_of_file == 3);
}

TEST_CASE("a write away from the end is refused, wherever it would land") {
  PositionState s = rewritten(10, 100);
  WriteCheck c = check_write(s, at_position(5), true);
  CHECK(c.verdict == WriteVerdict::kNotAtEnd);
  CHECK(c.intended_offset == 10);
  CHECK(c.landing_offset == 100);  // O_APPEND would put it here: silently misplaced without the check
  CHECK(check_write(rewritten(200, 100), at_position(1), true).verdict == WriteVerdict::kNotAtEnd);
}

TEST_CASE("empty writes are never violations") {
  CHECK(check_write(rewritten(0, 100), at_position(0), true).verdict == WriteVerdict::kAllowed);
}

TEST_CASE("pwrite: the offset must be the end; the position does not move") {
  PositionState s = rewritten(0, 100);
  CHECK(check_write(s, at_offset(5, 50), true).verdict == WriteVerdict::kNotAtEnd);
  WriteCheck c = check_write(s, at_offset(5, 100), true);
  CHECK(c.verdict == WriteVerdict::kAllowed);
  apply_write(s, at_offset(5, 100), c.landing_offset, 5);
  CHECK(s.position == 0);
  CHECK(s.end_of_file == 105);
}

TEST_CASE("a program that asked for O_APPEND always writes at the end") {
  PositionState s{3, 100, true, true};
  WriteCheck c = check_write(s, at_position(5), true);
  CHECK(c.verdict == WriteVerdict::kAllowed);
  CHECK(c.intended_offset == 100);
}

TEST_CASE("RWF_APPEND and RWF_NOAPPEND") {
  WriteRequest append = at_offset(5, 0);
  append.has_offset = false;
  append.rwf_append = true;
  CHECK(check_write({0, 100, false, false}, append, true).verdict == WriteVerdict::kAllowed);
  WriteRequest noappend = at_offset(5, 100);
  noappend.rwf_noappend = true;
  CHECK(check_write(rewritten(0, 100), noappend, true).verdict == WriteVerdict::kNoAppendFlag);
  // Audit: no O_APPEND of ours to bypass; only the offset counts.
  CHECK(check_write({0, 100, false, false}, noappend, false).verdict == WriteVerdict::kAllowed);
}

TEST_CASE("issue 24 item 8: RWF_APPEND and pwrite on the program's own O_APPEND land at the end: allowed") {
  WriteRequest append_at_zero = at_offset(5, 0);
  append_at_zero.rwf_append = true;  // pwritev2(fd, .., 0, RWF_APPEND)
  for (PositionState s : {rewritten(0, 100), PositionState{0, 100, false, false}}) {
    WriteCheck c = check_write(s, append_at_zero, true);
    CHECK(c.verdict == WriteVerdict::kAllowed);
    CHECK(c.intended_offset == 100);
    CHECK(c.landing_offset == 100);
  }
  // The program opened it O_APPEND (and the kernel appends): pwrite at any offset appends.
  for (uint64_t offset : {uint64_t{0}, uint64_t{7}, uint64_t{100}, uint64_t{500}}) {
    WriteCheck c = check_write({3, 100, true, true}, at_offset(5, offset), true);
    CHECK(c.verdict == WriteVerdict::kAllowed);
    CHECK(c.landing_offset == 100);
  }
  // appendguard added the O_APPEND: the program meant the offset, which is not the end.
  CHECK(check_write(rewritten(0, 100), at_offset(5, 0), true).verdict == WriteVerdict::kNotAtEnd);
  // RWF_NOAPPEND on the program's own O_APPEND descriptor writes in place (audit): the offset counts.
  WriteRequest noappend = at_offset(5, 0);
  noappend.rwf_noappend = true;
  CHECK(check_write({0, 100, true, true}, noappend, false).verdict == WriteVerdict::kNotAtEnd);
}

TEST_CASE("issue 23: a write the program means for the end but that would land elsewhere is refused") {
  // A file written anew (APPENDGUARD_REOPEN=rewrite, hold) for a program that asked for O_APPEND: the
  // descriptor does not append, its kernel offset left at 0.
  PositionState s{0, 100, true, false};
  WriteCheck c = check_write(s, at_position(5), true);
  CHECK(c.intended_offset == 100);
  CHECK(c.landing_offset == 0);
  CHECK(c.verdict == WriteVerdict::kNotAtEnd);
  // With the offset at the end it is allowed and lands there.
  c = check_write({100, 100, true, false}, at_position(5), true);
  CHECK(c.verdict == WriteVerdict::kAllowed);
  CHECK(c.landing_offset == 100);
  // A pwrite on such a descriptor lands at its offset: only the end is allowed.
  CHECK(check_write({100, 100, true, false}, at_offset(5, 0), true).verdict == WriteVerdict::kNotAtEnd);
  CHECK(check_write({100, 100, true, false}, at_offset(5, 100), true).verdict == WriteVerdict::kAllowed);
}

TEST_CASE("without O_APPEND (audit, truncating opens) bytes land at the position") {
  PositionState s{10, 100, false, false};
  WriteCheck c = check_write(s, at_position(5), false);
  CHECK(c.verdict == WriteVerdict::kNotAtEnd);
  CHECK(c.landing_offset == 10);
  apply_write(s, at_position(5), c.landing_offset, 5);
  CHECK(s.position == 15);
  CHECK(s.end_of_file == 100);
}

TEST_CASE("seek") {
  CHECK(compute_seek(5, 100, 10, SEEK_SET).offset == 10);
  CHECK(compute_seek(5, 100, 10, SEEK_CUR).offset == 15);
  CHECK(compute_seek(5, 100, -5, SEEK_CUR).offset == 0);
  CHECK(compute_seek(5, 100, -6, SEEK_CUR).error == EINVAL);
  CHECK(compute_seek(5, 100, 0, SEEK_END).offset == 100);
  CHECK(compute_seek(5, 100, -100, SEEK_END).offset == 0);
  CHECK(compute_seek(5, 100, -1, SEEK_SET).error == EINVAL);
  CHECK(compute_seek(5, 100, 50, SEEK_DATA).offset == 50);
  CHECK(compute_seek(5, 100, 100, SEEK_DATA).error == ENXIO);
  CHECK(compute_seek(5, 100, 50, SEEK_HOLE).offset == 100);
  CHECK(compute_seek(5, 100, 100, SEEK_HOLE).error == ENXIO);
  CHECK(compute_seek(5, 100, 0, 42).error == EINVAL);
  CHECK(compute_seek(5, 100, INT64_MAX, SEEK_END).error == EOVERFLOW);
  CHECK(compute_seek(5, 100, INT64_MIN, SEEK_END).error == EINVAL);
}

TEST_CASE("size changes") {
  CHECK(truncate_is_noop(100, 100));
  CHECK_FALSE(truncate_is_noop(100, 0));
  CHECK_FALSE(truncate_is_noop(100, -1));
  CHECK(fallocate_is_noop(100, 0, 0, 100));
  CHECK_FALSE(fallocate_is_noop(100, 0, 50, 51));
  CHECK(fallocate_is_noop(100, FALLOC_FL_KEEP_SIZE, 0, 1 << 20));
  CHECK_FALSE(fallocate_is_noop(100, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 10));
  CHECK_FALSE(fallocate_is_noop(100, 0, 0, 0));
}

TEST_CASE("deferred preallocation: growing resizes are deferred, cutting ones are not") {
  // ftruncate to the end or beyond
  DeferredResize r = defer_resize(0, 0, -1, 0, 62800);
  CHECK(r.deferrable);
  CHECK(r.logical_size == 62800);
  r = defer_resize(100, 500, -1, 0, 300);  // shrinks the reservation, not the bytes written
  CHECK(r.deferrable);
  CHECK(r.logical_size == 300);
  CHECK_FALSE(defer_resize(100, 0, -1, 0, 99).deferrable);  // cuts written bytes
  CHECK_FALSE(defer_resize(100, 0, -1, 0, -1).deferrable);  // EINVAL
  // fallocate mode 0 grows; KEEP_SIZE reserves without changing the size; other modes are not deferrable
  r = defer_resize(100, 0, 0, 50, 200);
  CHECK(r.deferrable);
  CHECK(r.logical_size == 250);
  r = defer_resize(100, 400, 0, 0, 200);
  CHECK(r.logical_size == 400);
  r = defer_resize(100, 0, FALLOC_FL_KEEP_SIZE, 0, 1000);
  CHECK(r.deferrable);
  CHECK(r.logical_size == 100);
  CHECK_FALSE(defer_resize(100, 0, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 10).deferrable);
  CHECK_FALSE(defer_resize(100, 0, 0, -1, 10).deferrable);
  CHECK_FALSE(defer_resize(100, 0, 0, 0, 0).deferrable);
}
