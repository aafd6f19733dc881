#!/usr/bin/env bash
# Configures and builds one preset (release by default): scripts/build.sh [release|debug|asan]
# QLM_CUDA_FAST_COMPILE=ON: CUDA device code in nvcc's fast-compile mode, a compile check (CI: .ci/run); every other
# build of release / debug resets it to OFF, so a tree CI configured never runs unoptimized kernels by surprise.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
jobs=${QLM_JOBS:-$(nproc)}
args=()
# The asan preset builds without CUDA (the option exists only where CUDA is on).
[[ $preset == asan ]] || args+=("-DQLM_CUDA_FAST_COMPILE=${QLM_CUDA_FAST_COMPILE:-OFF}")
cmake --preset "$preset" "${args[@]}" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
