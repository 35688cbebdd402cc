# Shared by scripts/test, scripts/demo and scripts/bench: install what is missing, configure and build.
# shellcheck shell=bash

APPENDGUARD_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
APPENDGUARD_BUILD="${APPENDGUARD_BUILD_DIR:-$APPENDGUARD_REPO/build}"

# Debian 12 packages the demo needs (scripts/demo): the build of the library, the launcher and
# appendonlyfs (libfmt-dev, libcli11-dev: header-only; libfuse3-dev, fuse3: the FUSE mount), and the venv.
APPENDGUARD_DEMO_PACKAGES=(cmake g++ make pkg-config libfmt-dev libcli11-dev libfuse3-dev fuse3 python3
  python3-venv)
# Debian 12 packages the build and the tests need (scripts/test, scripts/bench: these and the demo's).
# clang-format: the lint test runs, never skips; rclone: a real write-once store for the e2e tests;
# python3-venv: the real-client tests (PyTorch, safetensors) run in a virtual environment; e2fsprogs:
# chattr, for the kernel append-only (chattr +a) e2e tests; clang and libclang-rt-14-dev (libFuzzer and its
# ASan runtime, tests/fuzz: only a recommendation of clang, which --no-install-recommends leaves out) and
# clang-tidy (lint.clang_tidy); strace: scripts/bench sets tracing beside `strace -f`; GCC's sanitizer runtimes come
# with g++ (libasan8, libubsan1, libtsan2).
APPENDGUARD_PACKAGES=(cmake g++ make pkg-config libfmt-dev libunwind-dev catch2 libfuse3-dev fuse3 python3
  python3-venv clang-format rclone e2fsprogs clang libclang-rt-14-dev clang-tidy strace valgrind
  s3fs rsync  # s3fs, rsync: stores and operations of the conformance matrix (e2e.matrix)
  openmpi-bin slurm-wlm munge)  # the launchers tests (tests/launchers): mpirun, a one-node SLURM cluster
# `appendguard report --html`: libcli11-dev (its options; header-only, in the static launcher only) and
# chromium (the page's screenshot in tests/integration/test_report_html.py).
APPENDGUARD_PACKAGES+=(libcli11-dev chromium)
# librust-rustix-dev: rustix's sources for cargo, offline (integration.test_raw_syscalls_rustix and
# `scripts/bench raw`, whose tcmalloc workload also wants libgoogle-perftools4, not installed here).
APPENDGUARD_PACKAGES+=(librust-rustix-dev)
# test_go_programs builds a cgo-linked Go probe (the raw-call layer under Go's runtime).
APPENDGUARD_PACKAGES+=(golang-go)
# python3-hypothesis: the differential exerciser's generator and shrinker (tests/exerciser, scripts/exercise).
APPENDGUARD_PACKAGES+=(python3-hypothesis)

say() { printf '==> %s\n' "$*"; }

# Installs the packages named (default: the tests' and the demo's) that are missing.
install_missing_packages() {
  local missing=() wanted=("$@")
  [ ${#wanted[@]} -eq 0 ] && wanted=("${APPENDGUARD_DEMO_PACKAGES[@]}" "${APPENDGUARD_PACKAGES[@]}")
  for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "appendguard: missing Debian packages: ${missing[*]}" >&2
    echo "appendguard: run as root to install them, or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  say "installing ${missing[*]}"
  # libunwind-dev replaces the preinstalled libunwind-14-dev (LLVM's); apt-get -y does that itself.
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The real clients' versions: torch exactly (a range admitting newer releases pulls a CUDA build of
# several GB), safetensors 0.8 (the ftruncate-preallocating writer) and transformers (save_pretrained).
# moto[server]: the S3 endpoint on 127.0.0.1 under rclone and s3fs in the conformance matrix (e2e.matrix);
# accelerate, deepspeed, ray: the launchers tests (tests/launchers).
APPENDGUARD_CLIENT_REQUIREMENTS=(torch==2.13.0 "safetensors>=0.8,<0.9" "transformers>=5,<6" numpy "moto[server]"
  "accelerate>=1.10,<2" "deepspeed>=0.18,<0.20" "ray>=2.50,<3")
APPENDGUARD_CLIENT_IMPORTS="import torch, safetensors, transformers, numpy, moto.server, accelerate, deepspeed, ray"
# The demo's (scripts/demo): PyTorch's dcp.save (which needs numpy) and safetensors only.
APPENDGUARD_DEMO_REQUIREMENTS=(torch==2.13.0 "safetensors>=0.8,<0.9" numpy)
APPENDGUARD_DEMO_IMPORTS="import torch, safetensors, numpy"
APPENDGUARD_CLIENT_PYTHON=""

# Prepares the Python that runs the real-client tests (tests/realclients) and sets
# APPENDGUARD_CLIENT_PYTHON: a virtual environment ($APPENDGUARD_VENV, default build/venv), made once and
# reused. torch is installed only from a wheel already on disk (pip's find-links): never a silent
# download of gigabytes. Without one, a venv over an interpreter that already imports torch is used;
# failing that, the real-client tests are left out with one line saying how to enable them, or, with
# APPENDGUARD_REQUIRE_REAL_CLIENTS=1 (CI), the run stops. `prepare_client_python demo`: the demo's
# packages only (the tests' are added to the same venv by a later scripts/test).
prepare_client_python() {
  local venv="${APPENDGUARD_VENV:-$APPENDGUARD_BUILD/venv}" base=/usr/bin/python3 log
  local requirements=("${APPENDGUARD_CLIENT_REQUIREMENTS[@]}") imports="$APPENDGUARD_CLIENT_IMPORTS"
  if [ "${1:-}" = demo ]; then
    requirements=("${APPENDGUARD_DEMO_REQUIREMENTS[@]}")
    imports="$APPENDGUARD_DEMO_IMPORTS"
  fi
  [ -x "$base" ] || base="$(command -v python3)"
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$imports" 2>/dev/null; then
    APPENDGUARD_CLIENT_PYTHON="$venv/bin/python"
    return 0
  fi
  mkdir -p "$APPENDGUARD_BUILD"
  log="$APPENDGUARD_BUILD/venv-setup.log"
  say "preparing the real clients' Python in $venv (${requirements[*]}; log: $log)"
  if "$base" -m venv "$venv" >"$log" 2>&1 &&
    "$venv/bin/python" -m pip install -q --no-index --no-deps torch==2.13.0 >>"$log" 2>&1; then
    : # torch from a wheel on disk
  elif "$base" -c "import torch" 2>/dev/null; then
    rm -rf "$venv"
    "$base" -m venv --system-site-packages "$venv" >>"$log" 2>&1 || true
  else
    client_python_unavailable "no torch==2.13.0 wheel on disk (pip --find-links) and no importable torch"
    return 0
  fi
  if "$venv/bin/python" -m pip install -q "${requirements[@]}" >>"$log" 2>&1 &&
    "$venv/bin/python" -c "$imports" >>"$log" 2>&1; then
    APPENDGUARD_CLIENT_PYTHON="$venv/bin/python"
  else
    client_python_unavailable "installing ${requirements[*]} failed (see $log)"
  fi
}

client_python_unavailable() {
  if [ "${APPENDGUARD_REQUIRE_REAL_CLIENTS:-0}" = 1 ]; then
    echo "appendguard: real-client tests required (APPENDGUARD_REQUIRE_REAL_CLIENTS=1) but: $1" >&2
    exit 1
  fi
  echo "appendguard: real-client tests (PyTorch, safetensors) left out: $1; to enable them, put the" \
    "torch==2.13.0 CPU wheel in a pip --find-links folder, or set APPENDGUARD_VENV to a venv with torch," \
    "safetensors and transformers" >&2
}

build_appendguard() {
  say "building in $APPENDGUARD_BUILD"
  cmake -S "$APPENDGUARD_REPO" -B "$APPENDGUARD_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAPPENDGUARD_BUILD_TESTS=ON \
    -DAPPENDGUARD_CLIENT_PYTHON="$APPENDGUARD_CLIENT_PYTHON" >/dev/null
  cmake --build "$APPENDGUARD_BUILD" -j"$(nproc)" >/dev/null
}

# make's "[ 42%] ..." lines as one line per tenth done (read line by line: mawk would wait for a block).
show_tenths() {
  local line percent shown=0
  while IFS= read -r line; do
    [[ $line =~ ^\[\ *([0-9]+)%\] ]] || continue
    percent=${BASH_REMATCH[1]}
    if ((percent >= shown + 10)); then
      shown=$((percent - percent % 10))
      echo "    $shown% built"
    fi
  done
}

# The demo's build: the library, the launcher and appendonlyfs, no tests, with a line per tenth done
# (the whole output in build/demo-build.log).
build_demo_targets() {
  local log="$APPENDGUARD_BUILD/demo-build.log"
  mkdir -p "$APPENDGUARD_BUILD"
  say "building the library, the launcher and appendonlyfs in $APPENDGUARD_BUILD (log: $log)"
  cmake -S "$APPENDGUARD_REPO" -B "$APPENDGUARD_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DAPPENDGUARD_BUILD_TESTS=OFF >"$log" 2>&1 || { cat "$log" >&2; return 1; }
  if ! cmake --build "$APPENDGUARD_BUILD" -j"$(nproc)" --target appendguard appendguard_cli appendonlyfs 2>&1 |
    tee -a "$log" | show_tenths; then
    tail -n 40 "$log" >&2
    return 1
  fi
}

# A sanitizer build (address: ASan+UBSan, thread: TSan) of the library and the unit and integration
# suites, with GCC, in build/asan or build/tsan (the launcher and appendonlyfs are left out).
build_sanitized() {
  local kind=$1 dir=$2
  say "building with -fsanitize=$kind in $dir"
  cmake -S "$APPENDGUARD_REPO" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAPPENDGUARD_SANITIZE="$kind" \
    -DAPPENDGUARD_BUILD_APPENDONLYFS=OFF >/dev/null
  cmake --build "$dir" -j"$(nproc)" >/dev/null
}

# The libFuzzer targets (tests/fuzz), instrumented by clang, in their own build directory.
build_fuzzers() {
  local dir="$APPENDGUARD_BUILD/fuzz"
  say "building the fuzzers in $dir"
  cmake -S "$APPENDGUARD_REPO" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DAPPENDGUARD_FUZZ=ON -DAPPENDGUARD_BUILD_TESTS=OFF >/dev/null
  cmake --build "$dir" -j"$(nproc)" --target appendguard_fuzzers >/dev/null
}
