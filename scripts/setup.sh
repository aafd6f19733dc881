#!/usr/bin/env bash
# Installs the Debian packages qlm builds with. Idempotent: installs only what is missing.
# Usage: scripts/setup.sh            (needs root or sudo for apt-get)
set -euo pipefail

packages=(
  g++ cmake make ninja-build pkg-config ccache
  nlohmann-json3-dev libcli11-dev libfmt-dev libre2-dev libpcre2-dev libsentencepiece-dev libicu-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
)
# With a CUDA toolkit: CUTLASS's headers come from PyPI (scripts/fetch_cutlass.sh), which needs pip.
have_nvcc=0
if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  have_nvcc=1
  packages+=(python3 python3-pip unzip)
fi
fetch_cutlass() {
  if ((have_nvcc)); then "$(dirname "$0")/fetch_cutlass.sh"; fi
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  fetch_cutlass
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "setup: missing packages (${missing[*]}) and not root; run as root or install sudo" >&2
    exit 1
  fi
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fetch_cutlass
