#!/usr/bin/env bash
# build_libunwind.sh WORK_DIR: libunwind.so.8 for the wheel, at the library's glibc 2.17 floor, in
# WORK_DIR/libunwind.so.8 (with its licence, WORK_DIR/libunwind.COPYING). Debian 12's own needs GLIBC_2.34
# (pthread_once, stat...), which would make the wheel manylinux_2_34: this one is built from Debian's
# source of the same version (apt-get source, with a private package list: nothing of the machine's apt
# configuration changes) with those names bound to their old versions (libunwind_floor/). Local unwinding
# only: no minidebuginfo (so no liblzma to carry), no ptrace, coredump or setjmp libraries (libunwind's
# pthread names stay weak references, as its own build makes them). Kept: a second run with
# WORK_DIR/libunwind.so.8 present does nothing. Needs gcc, make, and Debian's package sources.
set -euo pipefail
work=$(mkdir -p "$1" && cd "$1" && pwd)
floor="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/libunwind_floor"
[ -f "$work/libunwind.so.8" ] && exit 0
version=1.6.2
apt="$work/apt"
mkdir -p "$apt/lists/partial" "$work/source"
echo "deb-src http://deb.debian.org/debian bookworm main" >"$apt/sources.list"
opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
  -o "Dir::State::Lists=$apt/lists" -o "APT::Sandbox::User=root")
apt-get "${opts[@]}" -qq update
(cd "$work/source" && apt-get "${opts[@]}" -qq source --download-only "libunwind=$version-3")
rm -rf "$work/source/libunwind-$version"
tar -xzf "$work/source/libunwind_$version.orig.tar.gz" -C "$work/source"
src="$work/source/libunwind-$version"
gcc -O2 -fPIC -include "$floor/floor.h" -c "$floor/stat_floor.c" -o "$work/stat_floor.o"
(cd "$src" && ./configure -q --disable-minidebuginfo --disable-zlibdebuginfo --disable-tests \
  --disable-documentation --disable-coredump --disable-ptrace --disable-setjmp --disable-static \
  CFLAGS="-O2 -include $floor/floor.h" LDFLAGS="-Wl,--wrap=stat -Wl,--wrap=fstat" \
  LIBS="$work/stat_floor.o" && make -s -j"$(nproc)" -C src)
cp -L "$src/src/.libs/libunwind.so.8" "$work/libunwind.so.8.tmp"
strip --strip-unneeded "$work/libunwind.so.8.tmp"
cp "$src/COPYING" "$work/libunwind.COPYING"
mv "$work/libunwind.so.8.tmp" "$work/libunwind.so.8"
