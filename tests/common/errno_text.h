// The errno names the C test programs print ("EOPNOTSUPP", ...), so the Python tests can compare them.
#ifndef APPENDGUARD_TESTS_ERRNO_TEXT_H
#define APPENDGUARD_TESTS_ERRNO_TEXT_H

#include <errno.h>

static inline const char* errno_text(int e) {
  switch (e) {
    case 0:
      return "0";
    case EOPNOTSUPP:
      return "EOPNOTSUPP";
    case EPERM:
      return "EPERM";
    case EBADF:
      return "EBADF";
    case EINVAL:
      return "EINVAL";
    case EIO:
      return "EIO";
    case EACCES:
      return "EACCES";
    case ENOENT:
      return "ENOENT";
    case EEXIST:
      return "EEXIST";
    case ENXIO:
      return "ENXIO";
    case EROFS:
      return "EROFS";
    case ENOSPC:
      return "ENOSPC";
    case EFBIG:
      return "EFBIG";
    case EMFILE:
      return "EMFILE";
    case EINTR:
      return "EINTR";
    default:
      return "E?";
  }
}

#endif
