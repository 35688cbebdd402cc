// The untracked path of every descriptor hook of interposed.def (INTERPOSED_FD rows): one load of the
// descriptor's table slot, then libc; a taken slot goes to `guarded::NAME` (guarded.h), or, for a number
// the program closed while a held write session keeps it open (FileTable::closed_by_program), to the
// EBADF the call would get without the library (held_sessions.h). Calls that write or change a size
// also test their result when some FUSE mount is not guarded whole (one flag, else a tail call as the
// others): a store's refusal on a file we do not guard is said once (unguarded_notice.h).
#include <errno.h>
#include <sys/mman.h>

#include <string_view>
#include <type_traits>

#include "shim/guard_write.h"
#include "shim/guarded.h"
#include "shim/held_sessions.h"
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
constexpr bool kReads_map = false;
constexpr bool kReads_read = false;
constexpr bool kReads_seek = false;
constexpr bool kReads_size_change = false;
constexpr bool kReads_stat = false;
constexpr bool kReads_sync = false;
constexpr bool kReads_write_at_offset = false;
constexpr bool kReads_write_at_position = false;
constexpr bool kReads_write_either = false;

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

// What a call on a number the program closed returns: -1 and EBADF; posix_fallocate returns EBADF;
// mmap returns MAP_FAILED.
template <typename Result, bool kErrorNumber>
Result closed_number_result() {
  if constexpr (kErrorNumber) {
    return EBADF;
  } else {
    errno = EBADF;
    if constexpr (std::is_pointer_v<Result>) {
      return MAP_FAILED;
    } else {
      return -1;
    }
  }
}

// The input of a copy (kind `copy`): a guarded descriptor there is noted as read (guard_write.h
// note_copy_input); every other signature has none (-1, whose slot is null).
constexpr bool kReads_copy = true;
struct CopyInput {
  int number;
  bool moves_position;  // no input offset: the call reads at the input's position
};
template <typename... Args>
CopyInput copy_input(Args...) {
  return {-1, false};
}
template <typename Offset>
CopyInput copy_input(int, int in_fd, Offset* offset, size_t) {  // sendfile, sendfile64
  return {in_fd, offset == nullptr};
}
inline CopyInput copy_input(int in_fd, off64_t* in_offset, int, off64_t*, size_t, unsigned) {
  return {in_fd, in_offset == nullptr};  // copy_file_range, splice
}
template <typename Result>
void note_copy_input_result(const char* name, CopyInput input, Result result) {
  if constexpr (std::is_same_v<Result, ssize_t>)
    note_copy_input(name, input.number, input.moves_position, result);
}

// mmap with MAP_ANONYMOUS ignores its descriptor: such a call is the program's, whatever the number.
#define APPENDGUARD_IGNORES_FD_map(addr, length, prot, flags, fd, offset) (((flags)&MAP_ANONYMOUS) != 0)
#define APPENDGUARD_IGNORES_FD_copy(...) false
#define APPENDGUARD_IGNORES_FD_read(...) false
#define APPENDGUARD_IGNORES_FD_seek(...) false
#define APPENDGUARD_IGNORES_FD_size_change(...) false
#define APPENDGUARD_IGNORES_FD_stat(...) false
#define APPENDGUARD_IGNORES_FD_sync(...) false
#define APPENDGUARD_IGNORES_FD_write_at_offset(...) false
#define APPENDGUARD_IGNORES_FD_write_at_position(...) false
#define APPENDGUARD_IGNORES_FD_write_either(...) false

}  // namespace

// NAME_closed: the slot says the program closed the number (cold, out of line): EBADF, unless the
// committer thread is closing that very number now (its slot is cleared right after): then the call
// waits for it and looks again (held_sessions.h).
// NAME_watched: the real call and a look at its failure, out of line so that the hook's untracked path
// keeps no frame of its own (a tail call to libc).
#define INTERPOSED_FD(name, kind, twin64, fd, ret, params, args)                                 \
  namespace {                                                                                    \
  [[gnu::noinline, maybe_unused]] ret name##_watched params {                                    \
    ret result = real_##name args;                                                               \
    note_if_failed<returns_error_number(#name)>(#name, fd, result);                              \
    return result;                                                                               \
  }                                                                                              \
  [[gnu::noinline, maybe_unused]] ret name##_from_guarded params {                               \
    ret result = real_##name args;                                                               \
    note_copy_input_result(#name, copy_input args, result);                                      \
    return result;                                                                               \
  }                                                                                              \
  [[gnu::noinline]] ret name##_closed params {                                                   \
    while (true) {                                                                               \
      Description* d = ::appendguard::g_files.slot(fd);                                          \
      if (d != ::appendguard::closed_by_program()) {                                             \
        if (d) return guarded::name APPENDGUARD_PASS_DESCRIPTION args;                           \
        return real_##name args;                                                                 \
      }                                                                                          \
      if (APPENDGUARD_IGNORES_FD_##kind args) return real_##name args;                           \
      if (!::appendguard::wait_while_committing(fd))                                             \
        return closed_number_result<ret, returns_error_number(#name)>();                         \
    }                                                                                            \
  }                                                                                              \
  }                                                                                              \
  APPENDGUARD_HOOK ret name params {                                                             \
    Description* d = ::appendguard::g_files.slot(fd);                                            \
    if (__builtin_expect(d == nullptr, 1)) {                                                     \
      if constexpr (kReads_##kind) {                                                             \
        if (__builtin_expect(::appendguard::g_files.slot(copy_input args.number) != nullptr, 0)) \
          return name##_from_guarded args;                                                       \
      }                                                                                          \
      if constexpr (kChecks_##kind) {                                                            \
        if (__builtin_expect(::appendguard::g_files.watching_untracked_failures(), 0)) {         \
          return name##_watched args;                                                            \
        }                                                                                        \
      }                                                                                          \
      return real_##name args;                                                                   \
    }                                                                                            \
    if (__builtin_expect(d == ::appendguard::closed_by_program(), 0)) return name##_closed args; \
    return guarded::name APPENDGUARD_PASS_DESCRIPTION args;                                      \
  }
#include "shim/interposed.def"
