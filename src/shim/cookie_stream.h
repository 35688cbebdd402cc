// Streams over guarded descriptors. fopen, fdopen and freopen on a guarded file return an fopencookie(3)
// stream whose callbacks read, write and seek through the checked descriptor path, so every byte the
// stream writes -- from fwrite, fprintf, an inlined putc, fflush or fclose -- is checked against the end
// of file when it reaches the file. The FILE's public _fileno field holds the real descriptor, so
// fileno() needs no hook and libstdc++'s fd-level I/O on the stream reaches our fd hooks.
#pragma once

#include <stdio.h>

#include "core/fopen_mode.h"

namespace appendguard {

// A stream over `fd` with `mode`'s directions; fclose closes `fd`. Null with errno set on failure, when
// `fd` is left open.
FILE* open_cookie_stream(int fd, const FopenMode& mode);

// One of ours? glibc's freopen cannot reopen an fopencookie stream (it crashes); ours are reopened by
// detach + attach instead.
bool is_cookie_stream(FILE* stream);
// The descriptor under one of our streams (-1 once detached).
int cookie_stream_fd(FILE* stream);

struct StreamCookie;
// freopen, first half: flushes one of our streams (checked), discards what it buffered and closes its
// descriptor. Returns its cookie, for attach_cookie_stream.
StreamCookie* detach_cookie_stream(FILE* stream);
// freopen, second half: the stream continues over `fd` with `mode`'s directions, its error and end-of-file
// indicators cleared. With fd < 0 (the open failed, errno set) it stays closed and null is returned, as
// freopen does.
FILE* attach_cookie_stream(StreamCookie* cookie, int fd, const FopenMode& mode);

}  // namespace appendguard
