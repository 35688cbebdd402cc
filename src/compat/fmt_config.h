// fmt's configuration for appendguard's report code, included before anything else in every file that
// may include fmt (the one definition rule needs it identical everywhere): no exceptions (a format error
// is a bug: the format strings are checked at compile time), no locales, no floating point (none is
// formatted). Each would otherwise add code and libstdc++ pieces that need GLIBC_2.3x (docs/design.md).
#pragma once

#define FMT_EXCEPTIONS 0
#define FMT_THROW(x) __builtin_abort()
#define FMT_STATIC_THOUSANDS_SEPARATOR ','
#define FMT_USE_FLOAT 0
#define FMT_USE_DOUBLE 0
#define FMT_USE_LONG_DOUBLE 0
