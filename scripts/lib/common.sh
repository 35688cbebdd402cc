# Shared by scripts/test, scripts/demo and scripts/bench: install what is missing, configure and build.
# shellcheck shell=bash

APPENDGUARD_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
APPENDGUARD_BUILD="${APPENDGUARD_BUILD_DIR:-$APPENDGUARD_REPO/build}"

# Debian 12 packages the build, the tests and the demo need.
# clang-format: the lint test runs, never skips; rclone: a real write-once store for the e2e tests;
# python3-venv: the real-client tests (PyTorch, safetensors) run in a virtual environment.
APPENDGUARD_PACKAGES=(cmake g++ make pkg-config libfmt-dev libunwind-dev catch2 libfuse3-dev fuse3 python3
  python3-venv clang-format rclone)

say() { printf '==> %s\n' "$*"; }

install_missing_packages() {
  local missing=()
  for pkg in "${APPENDGUARD_PACKAGES[@]}"; do
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

build_appendguard() {
  say "building in $APPENDGUARD_BUILD"
  cmake -S "$APPENDGUARD_REPO" -B "$APPENDGUARD_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$APPENDGUARD_BUILD" -j"$(nproc)" >/dev/null
}
