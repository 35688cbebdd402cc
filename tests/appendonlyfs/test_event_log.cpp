#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "event_log.hpp"

using namespace appendonlyfs;

TEST_CASE("errno names") {
  CHECK(errno_name(EOPNOTSUPP) == "EOPNOTSUPP");
  CHECK(errno_name(ENOTSUP) == "EOPNOTSUPP");
  CHECK(errno_name(EPERM) == "EPERM");
  CHECK(errno_name(EBADF) == "EBADF");
  CHECK(errno_name(EINVAL) == "EINVAL");
  CHECK(errno_name(ENOSYS) == "ENOSYS");
  CHECK(errno_name(ENOSPC) == "ENOSPC");
  CHECK(errno_name(EIO) == "EIO");
  CHECK(errno_name(ENOENT) == "ENOENT");
}

TEST_CASE("open flags text") {
  CHECK(open_flags_text(O_RDONLY) == "O_RDONLY");
  CHECK(open_flags_text(O_WRONLY | O_CREAT | O_TRUNC) == "O_WRONLY|O_CREAT|O_TRUNC");
  CHECK(open_flags_text(O_RDWR | O_APPEND | O_EXCL) == "O_RDWR|O_EXCL|O_APPEND");
}

TEST_CASE("log line format") {
  const LogLine line = LogLine("refused", "write")
                           .field("path", "/a.safetensors")
                           .field("offset", std::uint64_t{0})
                           .field("size", std::uint64_t{10})
                           .field("end", std::uint64_t{20})
                           .error(EOPNOTSUPP)
                           .field("profile", "hdfs");
  CHECK(line.text() ==
        "refused write path=/a.safetensors offset=0 size=10 end=20 errno=EOPNOTSUPP profile=hdfs");
}

TEST_CASE("event log appends one line per event") {
  char path[] = "/tmp/aofs-event-log-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::write(fd, "existing\n", 9);
  ::close(fd);
  {
    EventLog log;
    CHECK_FALSE(log.enabled());
    log.write(LogLine("ignored", "nothing"));  // disabled: no effect
    REQUIRE(log.open(path) == 0);
    CHECK(log.enabled());
    log.write(LogLine("fault", "eio").field("path", "/x"));
    log.write(LogLine("fault", "enospc").field("path", "/y"));
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "existing\nfault eio path=/x\nfault enospc path=/y\n");
  ::unlink(path);
}

TEST_CASE("event log open failure reports errno") {
  EventLog log;
  CHECK(log.open("/nonexistent-dir-aofs/log") == ENOENT);
}
