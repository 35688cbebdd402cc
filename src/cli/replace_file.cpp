#include "cli/replace_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <ctime>

#include "core/write_all.h"

namespace appendguard {

std::string random_suffix() {
  std::uint64_t bits = 0;
  if (getrandom(&bits, sizeof bits, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bits)) {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    static std::uint64_t serial = 0;
    bits = static_cast<std::uint64_t>(now.tv_nsec) * 0x9e3779b97f4a7c15ULL ^
           static_cast<std::uint64_t>(now.tv_sec) << 32 ^ static_cast<std::uint64_t>(getpid()) << 16 ^
           ++serial;
  }
  constexpr char kHex[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 0; i < 16; ++i) text[i] = kHex[(bits >> (4 * i)) & 15];
  return text;
}

namespace {

// Writes and syncs `data` into `fd`; 0 or the errno.
int write_synced(int fd, std::string_view data) {
  const WriteAllResult written = write_all(data.size(), [&](std::uint64_t done, std::uint64_t left) {
    return ::write(fd, data.data() + done, left);
  });
  if (const int error = written.error_or_eio()) return error;
  return fsync(fd) == 0 ? 0 : errno;
}

}  // namespace

int replace_file(const std::string& path, std::string_view data, mode_t mode) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return EISDIR;
  const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return errno;
  int error = EEXIST;
  std::string sibling;
  int fd = -1;
  for (int attempt = 0; attempt < 64 && fd < 0 && error == EEXIST; ++attempt) {
    sibling = "." + name.substr(0, 200) + "." + random_suffix() + ".partial";
    fd = openat(dir_fd, sibling.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    error = fd < 0 ? errno : 0;
  }
  if (fd >= 0) {
    error = write_synced(fd, data);
    // Still our file under that name (not one swapped in by someone who can write the directory).
    struct stat ours {};
    struct stat named {};
    if (error == 0 &&
        (fstat(fd, &ours) != 0 || fstatat(dir_fd, sibling.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
         ours.st_ino != named.st_ino || ours.st_dev != named.st_dev))
      error = EEXIST;
    if (close(fd) != 0 && error == 0) error = errno;
    if (error == 0 && renameat(dir_fd, sibling.c_str(), dir_fd, name.c_str()) != 0) error = errno;
    if (error != 0) unlinkat(dir_fd, sibling.c_str(), 0);
  }
  close(dir_fd);
  return error;
}

}  // namespace appendguard
