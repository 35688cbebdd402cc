// stdio on guarded files: fopen, fopen64, fdopen and freopen, and dprintf to guarded descriptors. glibc's
// streams do their I/O through internal aliases that no hook sees, so guarded files get streams of our
// own (cookie_stream.h); every other stream is glibc's, untouched. Untracked streams cost nothing: there
// is no hook on fwrite, putc, fflush or fileno, and fclose tests one table slot.
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core/fopen_mode.h"
#include "core/write_all.h"
#include "shim/append_only_attribute.h"
#include "shim/cookie_stream.h"
#include "shim/guard_descriptor.h"
#include "shim/guard_open.h"
#include "shim/guard_size.h"
#include "shim/guard_write.h"
#include "shim/guarded_paths.h"
#include "shim/held_sessions.h"
#include "shim/hook.h"
#include "shim/path_scratch.h"
#include "shim/trace.h"

using namespace appendguard;

namespace {

bool stdio_hooks_off() {
  return current_mode() == Mode::kOff || InternalScope::active();
}

// What glibc's fopen would open, with the flags decide_open chose. Tracked (or traced) by finish_open.
int open_for_stream(const OpenRequest& request, OpenDecision& decision) {
  auto call = [&](int flags) { return real_open64(request.path, flags, 0666); };
  if (!decision.guarded && !decision.trace_only) return call(decision.flags);
  return open_as_decided(request, decision, call);
}

FILE* stream_over(int fd, const FopenMode& mode) {
  if (fd < 0) return nullptr;
  FILE* stream = open_cookie_stream(fd, mode);
  if (!stream) {
    keep_errno([&](int) {
      note_close(fd);
      real_close(fd);
    });
  }
  return stream;
}

bool missing(const char* path) {
  struct stat64 st;
  return stat64(path, &st) != 0 && errno == ENOENT;
}

// A stream glibc opens itself (freopen keeps its FILE; ",ccs=" needs glibc's wide streams): enforce
// mode hands it a write-only append mode string and the descriptor is tracked. Its stdio writes reach the
// kernel unchecked, always at the end of file (O_APPEND); see docs/stdio.md.
template <typename Real>
FILE* open_by_glibc(const OpenRequest& request, OpenDecision& decision, const char* mode, Real&& real) {
  char rewritten[64];
  const char* used = mode;
  if (current_mode() == Mode::kEnforce && rewrite_fopen_mode(mode, rewritten, sizeof rewritten)) {
    // "a" would create a missing file: "r+" keeps its own mode there and glibc fails it with ENOENT.
    if (!(mode[0] == 'r' && missing(decision.path))) used = rewritten;
  }
  decision.flags = parse_fopen_mode(used).flags;
  FILE* stream = real(used);
  int fd = finish_open(request, decision, stream ? fileno(stream) : -1);
  if (stream && fd < 0) {
    keep_errno([&](int) {
      stream->_fileno = -1;  // finish_open closed it already
      fclose(stream);
    });
    return nullptr;
  }
  return stream;
}

template <typename Real>
FILE* fopen_hook(const char* function, const char* path, const char* mode, Real&& real) {
  if (__builtin_expect(stdio_hooks_off(), 1)) return real(path, mode);
  FopenMode parsed = parse_fopen_mode(mode);
  if (!parsed.valid || !path) return real(path, mode);
  OpenRequest request{function, AT_FDCWD, path, parsed.flags};
  OpenDecision decision;
  decide_open(request, decision);
  if (!decision.guarded && !decision.trace_only) {
    FILE* stream = real(path, mode);
    // A file with the kernel's append-only attribute: opened again with O_APPEND, guarded (issue 23), by
    // the one call of open_for_stream below.
    if (__builtin_expect(stream != nullptr, 1) || errno != EPERM || parsed.has_ccs ||
        !decide_append_only_retry(request, decision))
      return stream;
  } else if (decision.trace_only || parsed.has_ccs) {
    return open_by_glibc(request, decision, mode, [&](const char* m) { return real(path, m); });
  }
  return stream_over(open_for_stream(request, decision), parsed);
}

// freopen of a glibc stream (stdout...) onto a guarded file in a mode that does not append: glibc writes
// the stream with its internal calls, which no hook sees, so its writes are not checked; enforce mode's
// O_APPEND puts them at the end of file wherever the stream's position is (issue 24: said, not silent).
void notice_unchecked_glibc_stream(const char* function, const char* path, const char* mode) {
  char message[kMaxPath + 400];
  std::snprintf(message, sizeof message,
                "%s(\"%s\", \"%s\") reopens a glibc stream onto a guarded file: glibc writes such streams "
                "with internal calls that are not checked; %s; see docs/stdio.md",
                function, path, mode,
                current_mode() == Mode::kEnforce
                    ? "they land at the end of file (O_APPEND), wherever the stream's position is"
                    : "a write at a position other than the end is not reported");
  InternalScope internal;
  report_notice(message);
}

// freopen(NULL, mode, stream) reopens the stream's own file.
bool path_of_descriptor(int fd, char* out) {
  if (Description* d = g_files.lookup(fd)) {
    std::snprintf(out, kMaxPath, "%s", d->path);
    return true;
  }
  return descriptor_path(fd, out, kMaxPath);
}

template <typename Real>
FILE* freopen_hook(const char* function, const char* path, const char* mode, FILE* stream, Real&& real) {
  if (__builtin_expect(stdio_hooks_off(), 1)) return real(path, mode, stream);
  const bool ours = is_cookie_stream(stream);
  const int old_fd = ours ? cookie_stream_fd(stream) : fileno(stream);
  const bool old_tracked = g_files.lookup(old_fd) != nullptr;
  PathBuffer own_path;  // per thread, not on the stack
  const char* target = path                                                           ? path
                       : own_path.get() && path_of_descriptor(old_fd, own_path.get()) ? own_path.get()
                                                                                      : nullptr;
  FopenMode parsed = parse_fopen_mode(mode);
  OpenRequest request{function, AT_FDCWD, target, parsed.flags};
  OpenDecision decision;
  if (parsed.valid && target) decide_open(request, decision);

  if (ours) {  // glibc's freopen cannot reopen a cookie stream: we do it
    StreamCookie* cookie = detach_cookie_stream(stream);
    if (!parsed.valid || !target) {
      errno = parsed.valid ? EBADF : EINVAL;
      return nullptr;
    }
    return attach_cookie_stream(cookie, open_for_stream(request, decision), parsed);
  }
  if (!old_tracked && !decision.guarded && !decision.trace_only) return real(path, mode, stream);
  if (old_tracked) {
    fflush(stream);  // before glibc closes the descriptor behind our back
    note_close(old_fd);
  }
  if (!decision.guarded && !decision.trace_only) return real(path, mode, stream);
  FILE* reopened =
      open_by_glibc(request, decision, mode, [&](const char* m) { return real(path, m, stream); });
  if (reopened && decision.guarded && mode[0] != 'a') {
    keep_errno([&](int) { notice_unchecked_glibc_stream(function, decision.path, mode); });
  }
  return reopened;
}

// The program's view of a descriptor we may have made write-only: what it opened, not what we passed on.
bool mode_fits_descriptor(const FopenMode& mode, const Description* d) {
  int access = d->site.original_flags & O_ACCMODE;
  if (mode.reads() && access == O_WRONLY) return false;
  if (mode.writes() && access == O_RDONLY) return false;
  return true;
}

// fdopen "a": the stream appends. glibc sets O_APPEND on the descriptor if it lacks it.
void make_descriptor_append(int fd, Description* d) {
  int flags = real_fcntl(fd, F_GETFL);
  if (flags >= 0 && !(flags & O_APPEND)) {
    int applied = setfl_flags(d, flags | O_APPEND);
    note_setfl(fd, d, flags | O_APPEND, applied, real_fcntl(fd, F_SETFL, applied));
  }
  if (HeldFile file(fd, d); file) d->program_appends = true;
}

// ---------------------------------------------------------------- dprintf

// glibc's dprintf formats into a private stream whose writes no hook sees: format here, write checked.
int guarded_vdprintf(const char* operation, int fd, Description* d, const char* format, va_list args) {
  char local[1024];
  char* text = local;
  va_list again;
  va_copy(again, args);
  int length = std::vsnprintf(local, sizeof local, format, args);
  if (length >= static_cast<int>(sizeof local)) {
    text = static_cast<char*>(std::malloc(static_cast<size_t>(length) + 1));
    if (text) {
      std::vsnprintf(text, static_cast<size_t>(length) + 1, format, again);
    } else {
      errno = ENOMEM;
      length = -1;
    }
  }
  va_end(again);
  if (length < 0) return -1;
  size_t count = static_cast<size_t>(length);
  ssize_t written = guarded_write(operation, fd, d, WriteRequest::at_position(count), [&] {
    return write_all(count, [&](uint64_t done, uint64_t left) { return real_write(fd, text + done, left); })
        .as_write_result();
  });
  if (text != local) keep_errno([&](int) { std::free(text); });
  return written == static_cast<ssize_t>(count) ? length : -1;
}

}  // namespace

// glibc closes a stream's descriptor internally. A glibc stream can hold a tracked descriptor (freopen
// onto a guarded path): forget it first, or the next file to get that number would be checked as this
// one. Cookie streams close through our own callback.
APPENDGUARD_HOOK int fclose(FILE* stream) {
  int fd = stream ? stream->_fileno : -1;
  if (__builtin_expect(g_files.lookup(fd) == nullptr, 1)) return real_fclose(stream);
  PathBuffer buffer;  // per thread, not on the stack (shim/path_scratch.h)
  char* path = buffer.get();
  Description* d = g_files.lookup(fd);
  if (path) path[0] = '\0';
  if (path && d && tracing()) snprintf(path, kMaxPath, "%s", d->path);
  if (!is_cookie_stream(stream)) {
    real_fflush(stream);  // its last bytes reach the descriptor while it is still the one we know
    if (d) fill_reservation_before_close(fd, d);
    note_close(fd);
  }
  int result = real_fclose(stream);
  if (path && path[0]) keep_errno([&](int error) { trace("fclose", fd, path, result, error, "%s", ""); });
  return result;
}

APPENDGUARD_HOOK FILE* fopen(const char* path, const char* mode) {
  return fopen_hook("fopen", path, mode, [](const char* p, const char* m) { return real_fopen(p, m); });
}

APPENDGUARD_HOOK FILE* fopen64(const char* path, const char* mode) {
  return fopen_hook("fopen64", path, mode, [](const char* p, const char* m) { return real_fopen64(p, m); });
}

APPENDGUARD_HOOK FILE* freopen(const char* path, const char* mode, FILE* stream) {
  return freopen_hook("freopen", path, mode, stream,
                      [](const char* p, const char* m, FILE* s) { return real_freopen(p, m, s); });
}

APPENDGUARD_HOOK FILE* freopen64(const char* path, const char* mode, FILE* stream) {
  return freopen_hook("freopen64", path, mode, stream,
                      [](const char* p, const char* m, FILE* s) { return real_freopen64(p, m, s); });
}

APPENDGUARD_HOOK FILE* fdopen(int fd, const char* mode) {
  Description* d = tracked_description(fd);
  if (__builtin_expect(!d, 1)) return closed_number(fd) ? (errno = EBADF, nullptr) : real_fdopen(fd, mode);
  FopenMode parsed = parse_fopen_mode(mode);
  if (!parsed.valid) return real_fdopen(fd, mode);
  if (!mode_fits_descriptor(parsed, d)) {
    errno = EINVAL;
    return nullptr;
  }
  if (parsed.kind == 'a') make_descriptor_append(fd, d);
  FILE* stream = open_cookie_stream(fd, parsed);
  if (tracing()) {
    keep_errno([&](int error) {
      trace("fdopen", fd, d->path, stream ? 0 : -1, stream ? 0 : error, "a stream of ours, mode '%c'",
            parsed.kind);
    });
  }
  return stream;
}

APPENDGUARD_HOOK int vdprintf(int fd, const char* format, va_list args) {
  Description* d = tracked_description(fd);
  if (__builtin_expect(!d, 1))
    return closed_number(fd) ? (errno = EBADF, -1) : real_vdprintf(fd, format, args);
  return guarded_vdprintf("vdprintf", fd, d, format, args);
}

APPENDGUARD_HOOK int dprintf(int fd, const char* format, ...) {
  va_list args;
  va_start(args, format);
  Description* d = tracked_description(fd);
  int result = d                   ? guarded_vdprintf("dprintf", fd, d, format, args)
               : closed_number(fd) ? (errno = EBADF, -1)
                                   : real_vdprintf(fd, format, args);
  va_end(args);
  return result;
}

// The fortified names (_FORTIFY_SOURCE): `flag` only adds checks of the format that vsnprintf does not
// need on our path.
APPENDGUARD_HOOK int __vdprintf_chk(int fd, int flag, const char* format, va_list args) {
  Description* d = tracked_description(fd);
  if (__builtin_expect(!d, 1))
    return closed_number(fd) ? (errno = EBADF, -1) : real___vdprintf_chk(fd, flag, format, args);
  return guarded_vdprintf("__vdprintf_chk", fd, d, format, args);
}

APPENDGUARD_HOOK int __dprintf_chk(int fd, int flag, const char* format, ...) {
  va_list args;
  va_start(args, format);
  Description* d = tracked_description(fd);
  int result = d                   ? guarded_vdprintf("__dprintf_chk", fd, d, format, args)
               : closed_number(fd) ? (errno = EBADF, -1)
                                   : real___vdprintf_chk(fd, flag, format, args);
  va_end(args);
  return result;
}
