// Truncation and preallocation: refused on guarded files unless they leave the size as it is.
#include "shim/guard_size.h"
#include "shim/guarded.h"
#include "shim/guarded_paths.h"
#include "shim/hook.h"
#include "shim/path_scratch.h"
#include "shim/store_refusal.h"
#include "shim/trace.h"

using namespace appendguard;

namespace {

template <typename Real>
int truncate_hook(const char* operation, const char* path, off64_t length, Real&& real) {
  if (__builtin_expect(current_mode() == Mode::kOff, 1)) return real();
  PathBuffer full_path;  // per thread, not on the stack (shim/path_scratch.h)
  if (!guarded_path(path, full_path.get())) {
    int result = real();
    if (__builtin_expect(result != 0, 0)) note_refused_truncate(operation, path, length, errno);
    return result;
  }
  return guarded_truncate(operation, full_path.get(), length, real);
}

template <typename Stat, typename Real>
int stat_and_note(const char* operation, const Description* d, int fd, Stat* st, Real&& real) {
  int result = real();
  if (InternalScope::active()) return result;
  if (result == 0) st->st_size = size_seen_by_program(fd, st->st_size);
  if (tracing()) {
    keep_errno([&](int error) {
      trace(operation, fd, d->path, result, error, "size=%lld",
            result == 0 ? static_cast<long long>(st->st_size) : -1LL);
    });
  }
  return result;
}

}  // namespace

int guarded::ftruncate(int fd, off_t length, Description* d) {
  return guarded_resize("ftruncate", fd, d, Resize::truncation(length),
                        [&] { return real_ftruncate(fd, length); });
}

int guarded::ftruncate64(int fd, off64_t length, Description* d) {
  return guarded_resize("ftruncate64", fd, d, Resize::truncation(length),
                        [&] { return real_ftruncate64(fd, length); });
}

// fstat of a file whose preallocation was deferred reports the size the program was promised.
int guarded::fstat(int fd, struct stat* st, Description* d) {
  return stat_and_note("fstat", d, fd, st, [&] { return real_fstat(fd, st); });
}

int guarded::fstat64(int fd, struct stat64* st, Description* d) {
  return stat_and_note("fstat64", d, fd, st, [&] { return real_fstat64(fd, st); });
}

int guarded::__fxstat(int version, int fd, struct stat* st, Description* d) {
  return stat_and_note("__fxstat", d, fd, st, [&] { return real___fxstat(version, fd, st); });
}

int guarded::__fxstat64(int version, int fd, struct stat64* st, Description* d) {
  return stat_and_note("__fxstat64", d, fd, st, [&] { return real___fxstat64(version, fd, st); });
}

APPENDGUARD_HOOK int truncate(const char* path, off_t length) {
  return truncate_hook("truncate", path, length, [&] { return real_truncate(path, length); });
}

APPENDGUARD_HOOK int truncate64(const char* path, off64_t length) {
  return truncate_hook("truncate64", path, length, [&] { return real_truncate64(path, length); });
}

int guarded::fallocate(int fd, int mode, off_t offset, off_t length, Description* d) {
  return guarded_resize("fallocate", fd, d, Resize::allocation(offset, length, mode, false),
                        [&] { return real_fallocate(fd, mode, offset, length); });
}

int guarded::fallocate64(int fd, int mode, off64_t offset, off64_t length, Description* d) {
  return guarded_resize("fallocate64", fd, d, Resize::allocation(offset, length, mode, false),
                        [&] { return real_fallocate64(fd, mode, offset, length); });
}

int guarded::posix_fallocate(int fd, off_t offset, off_t length, Description* d) {
  return guarded_resize("posix_fallocate", fd, d, Resize::allocation(offset, length, 0, true),
                        [&] { return real_posix_fallocate(fd, offset, length); });
}

int guarded::posix_fallocate64(int fd, off64_t offset, off64_t length, Description* d) {
  return guarded_resize("posix_fallocate64", fd, d, Resize::allocation(offset, length, 0, true),
                        [&] { return real_posix_fallocate64(fd, offset, length); });
}
