// The untracked path of every descriptor hook of interposed.def (INTERPOSED_FD rows): one load of the
// descriptor's table slot, then libc; a taken slot goes to `guarded::NAME` (guarded.h). Calls that write
// or change a size also test their result when some FUSE mount is not guarded whole (one flag, else a
// tail call as the others): a store's refusal on a file we do not guard is said once (unguarded_notice.h).
#include <errno.h>

#include <string_view>
#include <type_traits>

#include "shim/guarded.h"
#include "shim/hook.h"
#include "shim/unguarded_notice.h"

using namespace appendguard;

namespace {

// Per kind of interposed.def: whether a failure of the untracked call is looked at.
constexpr bool kChecks_copy = true;
constexpr bool kChecks_map = false;
constexpr bool kChecks_read = false;
constexpr bool kChecks_seek = false;
constexpr bool kChecks_size_change = true;
constexpr bool kChecks_stat = false;
constexpr bool kChecks_sync = false;
constexpr bool kChecks_write_at_offset = true;
constexpr bool kChecks_write_at_position = true;
constexpr bool kChecks_write_either = true;

// posix_fallocate returns the error number instead of setting errno.
constexpr bool returns_error_number(std::string_view name) {
  return name.starts_with("posix_fallocate");
}

// A failure of the real call, looked at (cold, out of line). posix_fallocate returns its error.
template <bool kErrorNumber, typename Result>
[[gnu::always_inline]] inline void note_if_failed(const char* name, int fd, Result result) {
  if constexpr (std::is_integral_v<Result>) {
    if constexpr (kErrorNumber) {
      if (__builtin_expect(result != 0, 0)) note_unguarded_failure(name, fd, static_cast<int>(result));
    } else {
      if (__builtin_expect(result < 0, 0)) note_unguarded_failure(name, fd, errno);
    }
  }
}

}  // namespace

// NAME_watched: the real call and a look at its failure, out of line so that the hook's untracked path
// keeps no frame of its own (a tail call to libc).
#define INTERPOSED_FD(name, kind, twin64, fd, ret, params, args)                         \
  namespace {                                                                            \
  [[gnu::noinline, maybe_unused]] ret name##_watched params {                            \
    ret result = real_##name args;                                                       \
    note_if_failed<returns_error_number(#name)>(#name, fd, result);                      \
    return result;                                                                       \
  }                                                                                      \
  }                                                                                      \
  APPENDGUARD_HOOK ret name params {                                                     \
    if (__builtin_expect(::appendguard::g_files.lookup(fd) == nullptr, 1)) {             \
      if constexpr (kChecks_##kind) {                                                    \
        if (__builtin_expect(::appendguard::g_files.watching_untracked_failures(), 0)) { \
          return name##_watched args;                                                    \
        }                                                                                \
      }                                                                                  \
      return real_##name args;                                                           \
    }                                                                                    \
    return guarded::name args;                                                           \
  }
#include "shim/interposed.def"
