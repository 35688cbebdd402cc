#include <catch2/catch.hpp>

#include <fcntl.h>

#include "core/held_files.h"

using namespace appendguard;

namespace {

HeldSession session(int fd, ino_t inode) {
  HeldSession s;
  s.fd = fd;
  s.device = 7;
  s.inode = inode;
  s.end_of_file = 100 + static_cast<uint64_t>(fd);
  return s;
}

}  // namespace

TEST_CASE("a held session is found by its file and by its descriptor, once") {
  HeldSet set;
  HeldSession evicted;
  CHECK_FALSE(set.add(session(10, 1), evicted));
  CHECK_FALSE(set.add(session(11, 2), evicted));
  CHECK(set.size() == 2);
  CHECK(set.holds_fd(10));
  HeldSession out;
  CHECK_FALSE(set.take_file(8, 1, out));  // same inode, another device
  REQUIRE(set.take_file(7, 1, out));
  CHECK(out.fd == 10);
  CHECK(out.end_of_file == 110);
  CHECK_FALSE(set.take_file(7, 1, out));
  CHECK_FALSE(set.holds_fd(10));
  REQUIRE(set.take_fd(11, out));
  CHECK(out.inode == 2);
  CHECK(set.size() == 0);
}

TEST_CASE("a full set gives up its oldest session first") {
  HeldSet set;
  HeldSession evicted;
  for (int i = 0; i < static_cast<int>(HeldSet::kCapacity); ++i)
    CHECK_FALSE(set.add(session(100 + i, i), evicted));
  HeldSession out;
  REQUIRE(set.take_fd(100, out));  // the oldest leaves by reuse: the next oldest is 101
  CHECK_FALSE(set.add(session(500, 500), evicted));
  REQUIRE(set.add(session(501, 501), evicted));
  CHECK(evicted.fd == 101);
  REQUIRE(set.add(session(502, 502), evicted));
  CHECK(evicted.fd == 102);
  CHECK(set.size() == HeldSet::kCapacity);
}

TEST_CASE("a range of descriptors is taken oldest first; a forked child forgets everything") {
  HeldSet set;
  HeldSession evicted;
  set.add(session(9, 1), evicted);
  set.add(session(5, 2), evicted);
  set.add(session(30, 3), evicted);
  set.add(session(7, 4), evicted);
  HeldSession out[8];
  REQUIRE(set.take_range(5, 9, out, 8) == 3);
  CHECK(out[0].fd == 9);
  CHECK(out[1].fd == 5);
  CHECK(out[2].fd == 7);
  CHECK(set.size() == 1);
  set.add(session(31, 5), evicted);
  REQUIRE(set.take_all(out, 1) == 1);  // bounded by the capacity given
  CHECK(out[0].fd == 30);
  set.forget_all();
  CHECK(set.size() == 0);
  CHECK_FALSE(set.holds_fd(31));
}

TEST_CASE("what the program's close and the next open do to a session") {
  CloseFacts f;
  f.hold_mode = f.started_session = f.last_descriptor = f.by_owner = true;
  CHECK(holds_on_close(f));
  CloseFacts g = f;
  g.commit_requested = true;  // fsync before close: the program wants it committed
  CHECK_FALSE(holds_on_close(g));
  g = f;
  g.started_session = false;  // reopened by us, or an existing file: its close is the real one
  CHECK_FALSE(holds_on_close(g));
  g = f;
  g.last_descriptor = false;  // a dup is still open
  CHECK_FALSE(holds_on_close(g));
  g = f;
  g.by_owner = false;  // a vfork child's close
  CHECK_FALSE(holds_on_close(g));
  g = f;
  g.hold_mode = false;
  CHECK_FALSE(holds_on_close(g));
  g = f;
  g.reservation_pending = true;
  CHECK_FALSE(holds_on_close(g));

  HeldSession s;
  s.children = 2;
  CHECK(on_open_of_held(s, O_RDWR, 2) == HeldOpen::kReuse);                         // "r+b"
  CHECK(on_open_of_held(s, O_WRONLY | O_APPEND | O_CREAT, 2) == HeldOpen::kReuse);  // "ab"
  CHECK(on_open_of_held(s, O_WRONLY, 2) == HeldOpen::kReuse);
  CHECK(on_open_of_held(s, O_WRONLY | O_CREAT | O_TRUNC, 2) == HeldOpen::kCommitThenOpen);  // "wb" again
  CHECK(on_open_of_held(s, O_RDONLY, 2) == HeldOpen::kCommitThenOpen);  // a read must see the bytes
  // A child started since the session was held may have ended it (its close is a FLUSH): not reused.
  CHECK(on_open_of_held(s, O_RDWR, 3) == HeldOpen::kCommitThenOpen);
}

TEST_CASE("the time limit takes sessions held at least that long, oldest first; 0 is no limit") {
  HeldSet set;
  HeldSession evicted, out;
  HeldSession a = session(10, 1), b = session(11, 2);
  a.held_at = 1000;
  b.held_at = 1500;
  set.add(a, evicted);
  set.add(b, evicted);
  CHECK(set.next_deadline(0) == 0);
  CHECK_FALSE(set.take_expired(99999, 0, out));
  CHECK(set.next_deadline(100) == 1100);
  CHECK_FALSE(set.take_expired(1099, 100, out));
  REQUIRE(set.take_expired(1100, 100, out));
  CHECK(out.fd == 10);
  CHECK(set.next_deadline(100) == 1600);
  CHECK_FALSE(set.take_expired(1599, 100, out));
  REQUIRE(set.take_expired(5000, 100, out));
  CHECK(out.fd == 11);
  CHECK(set.next_deadline(100) == 0);
  CHECK_FALSE(set.take_expired(5000, 100, out));
}
