// A store's refusal of a call on a file the library does not guard (core/unguarded_failure.h): said once
// per file, so that a job left unguarded by its settings is not left with the store's errno alone. The
// hooks call these only after the real call failed: the untracked path gains one test of its result.
#pragma once

namespace appendguard {

// `call` on descriptor `fd` failed with `error` (errno is kept).
[[gnu::cold, gnu::noinline]] void note_unguarded_failure(const char* call, int fd, int error);
// close(fd) of a number we do not track failed with `error` (errno is kept): said once per process.
[[gnu::cold, gnu::noinline]] void note_unguarded_close_failure(int fd, int error);
// A write open of `path` (relative to `dirfd`) failed with `error` (errno is kept).
[[gnu::cold, gnu::noinline]] void note_unguarded_open_failure(const char* call, int dirfd, const char* path,
                                                              int error);

}  // namespace appendguard
