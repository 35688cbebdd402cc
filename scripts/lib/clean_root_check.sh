#!/usr/bin/env bash
# clean_root_check.sh ROOT WHEEL SDIST [SUITE]: installs the wheel, then the sdist (built from source),
# each into a fresh venv inside ROOT, a clean root of Debian 12 (SUITE bookworm, the default) or Ubuntu
# 24.04 (noble) with a compiler and Python only (made by debootstrap when ROOT does not exist:
# --variant=minbase with g++, python3, python3-venv, python3-pip, ca-certificates; no libfmt-dev,
# libcli11-dev, libunwind-dev, nor libunwind8; Ubuntu's without its archive's signature check, since
# Debian 12 has no Ubuntu keyring to check it with), and runs release_writer.py through each one's
# `appendguard run`: the append must go through, the write back be refused with a report; with the wheel,
# the report's native stack comes from the wheel's own libunwind; with the sdist, where no libunwind is
# installed, the report says so. Prints the time of each step. Needs root (chroot, mounts) and the network
# (Debian's packages for debootstrap, PyPI for the sdist's build requirements).
set -euo pipefail
root=$1 wheel=$(realpath "$2") sdist=$(realpath "$3") suite=${4:-bookworm}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
clock() { date +%s; }
took() { echo "$1: $(($(clock) - $2)) s"; }
if [ ! -d "$root/usr" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap
  start=$(clock)
  packages=g++,python3,python3-venv,python3-pip,ca-certificates
  if [ "$suite" = noble ]; then
    debootstrap --no-check-gpg --variant=minbase --components=main,universe --include=$packages noble "$root" \
      http://archive.ubuntu.com/ubuntu /usr/share/debootstrap/scripts/gutsy >"$root.debootstrap.log" 2>&1
  else
    debootstrap --variant=minbase --include=$packages "$suite" "$root" http://deb.debian.org/debian \
      >"$root.debootstrap.log" 2>&1
  fi
  took "debootstrap of $suite (minbase, g++, python3)" "$start"
fi
for pkg in libfmt-dev libcli11-dev libunwind-dev libunwind8 cmake; do
  if chroot "$root" dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    echo "FAIL: $pkg is installed in $root: not a clean root" >&2
    exit 1
  fi
done
echo "-dev packages in the root (g++'s own): $(chroot "$root" dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' \
  '*-dev' | awk '$1 == "ii" {printf "%s ", $2}')"
mounted=()
cleanup() { for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" || true; done; }
trap cleanup EXIT
for fs in proc dev; do
  mountpoint -q "$root/$fs" || { mount --bind "/$fs" "$root/$fs"; mounted+=("$root/$fs"); }
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
check=/tmp/release-check
rm -rf "${root:?}$check"
mkdir -p "$root$check"
cp "$wheel" "$sdist" "$here/release_writer.py" "$root$check/"
# pip in the root reaches PyPI as the host's does: through the host's trust store (a machine behind a
# proxy with a certificate of its own has it there).
cp /etc/ssl/certs/ca-certificates.crt "$root$check/ca.crt"
run() {
  chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 PIP_CERT=$check/ca.crt \
    PIP_DISABLE_PIP_VERSION_CHECK=1 bash -ec "$1"
}
expect() {  # expect OUTPUT WHAT WORD...
  local out=$1 what=$2
  shift 2
  for word in "$@"; do
    grep -qF -- "$word" <<<"$out" || { echo "FAIL: $what: no '$word' in:"; echo "$out"; exit 1; } >&2
  done
}
for kind in wheel sdist; do
  file=$check/$(basename "$([ $kind = wheel ] && echo "$wheel" || echo "$sdist")")
  start=$(clock)
  run "python3 -m venv $check/$kind && $check/$kind/bin/pip install -q --disable-pip-version-check $file"
  took "pip install of the $kind" "$start"
  out=$(run "cd $check && $check/$kind/bin/appendguard run -- $check/$kind/bin/python release_writer.py \
    $check/$kind.safetensors 2>&1")
  expect "$out" "the $kind's appendguard run" backward=EOPNOTSUPP size=24 "$kind.safetensors"
  if [ $kind = wheel ]; then
    expect "$out" "the wheel's report" "native stack:" "unwind=$check/wheel/lib/python3" \
      "/site-packages/appendguard/lib/libunwind.so.8"
  else
    expect "$out" "the sdist's report" "libunwind.so.8 is not installed: no backtrace" "unwind="
  fi
  echo "the $kind: installed and guarding in $root"
done
