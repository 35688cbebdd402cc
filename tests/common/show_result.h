// The line a C test program prints for a call's result, which the Python tests parse: "key=result", or
// "key=-1 errno=NAME" when it failed.
#ifndef APPENDGUARD_TESTS_SHOW_RESULT_H
#define APPENDGUARD_TESTS_SHOW_RESULT_H

#include <errno.h>
#include <stdio.h>

#include "errno_text.h"

static inline void show(const char* key, long result) {
  if (result < 0) {
    printf("%s=%ld errno=%s\n", key, result, errno_text(errno));
  } else {
    printf("%s=%ld\n", key, result);
  }
  fflush(stdout);
}

#endif
