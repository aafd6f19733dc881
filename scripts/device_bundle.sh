#!/usr/bin/env bash
# Builds qlm for the GPU machine (sm_90 only, Release) on this machine and packs what the GPU test
# and benchmark scripts need into .device/bundle.tar.xz: the CLI, the library, the test binary, the
# example plugin, and the shared libraries they link that are not glibc, the GCC runtime or CUDA
# (the GPU machine has those; it lacks re2, sentencepiece, ICU 72, ...). The bundle keeps the build
# tree's paths (build/device/...), so binaries find the repo's test data at the same absolute path.
#
# Usage: scripts/device_bundle.sh          then, through the `device` tool, with carry [".device"]:
#        scripts/gpu_check.sh              (tests)   /   scripts/bench_gpu.sh   (benchmarks)
# Env:   BUILD_DIR (default build/device), SKIP_BUILD=1 to pack an existing build, ALLOW_NO_SM90A=1 to
#        pack a build without the sm_90a kernels (refused otherwise),
#        BUNDLE_DIR (default .device): where the bundle goes (another folder lets two people keep
#        their own bundles; carry that folder and set BUNDLE_DIR the same way on the GPU machine).
# Also builds the decode-step tracer (bench/probes/cupti_trace.cc) into BUNDLE_DIR where CUPTI is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/device}

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  # The sm_90a kernels (wgmma W4A16, CUTLASS FP8) need the pinned CUTLASS headers; without them CMake
  # leaves those kernels out, and a bundle without them would measure the fallback paths.
  scripts/fetch_cutlass.sh
  # Configured every time (cheap): a build tree configured before the headers existed re-checks them.
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQLM_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DQLM_BENCH=OFF >/dev/null
  cmake --build "$BUILD_DIR" --target qlm qlm_tests qlm_my_quant_plugin -j"$(nproc)"
fi
if ! grep -q 'qlm_sm90a' "$BUILD_DIR/build.ninja" && [[ ${ALLOW_NO_SM90A:-0} != 1 ]]; then
  echo "device_bundle: $BUILD_DIR has no sm_90a kernels (CUTLASS headers missing at configure time:" \
    "run scripts/fetch_cutlass.sh and re-run; ALLOW_NO_SM90A=1 packs it anyway)" >&2
  exit 1
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$BUILD_DIR/tests" "$stage/$BUILD_DIR/examples" "$stage/.device-lib"
cp -a "$BUILD_DIR"/qlm "$BUILD_DIR"/libqlm.so* "$stage/$BUILD_DIR/"
cp -a "$BUILD_DIR"/tests/qlm_tests "$stage/$BUILD_DIR/tests/"
find "$BUILD_DIR/examples" -name '*.so' -exec cp -a --parents {} "$stage/" \;
binaries=("$BUILD_DIR/qlm" "$BUILD_DIR/libqlm.so" "$BUILD_DIR/tests/qlm_tests")
# Shared libraries to carry: everything resolved except the C library, the GCC runtime, CUDA and
# NCCL (the GPU machine's PyTorch brings libnccl.so.2; device_env.sh puts it on the library path).
ldd "${binaries[@]}" | awk '/=> \// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libgcc_s|libstdc\+\+|libqlm|libnccl)\.so|/libcu[A-Za-z]*\.so|/libnv' |
  while read -r lib; do cp -L "$lib" "$stage/.device-lib/"; done
BUNDLE_DIR=${BUNDLE_DIR:-.device}
mkdir -p "$BUNDLE_DIR"
tar -C "$stage" -cJf "$BUNDLE_DIR/bundle.tar.xz" .
# The decode-step tracer of scripts/probe_decode_trace.sh (an investigation probe, outside the bundle), with the
# CUPTI library it links, where this machine's CUDA toolkit has CUPTI.
cuda_root=$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")
cupti_lib=$(ls "$cuda_root"/lib*/libcupti.so.* "$cuda_root"/extras/CUPTI/lib64/libcupti.so.* 2>/dev/null | head -1 || true)
if [[ -f "$cuda_root/include/cupti.h" && -n $cupti_lib ]] &&
  g++ -std=c++17 -O2 -shared -fPIC -I"$cuda_root/include" bench/probes/cupti_trace.cc -L"$(dirname "$cupti_lib")"     -lcupti -o "$BUNDLE_DIR/libqlm_cupti_trace.so" 2>/dev/null; then
  cp -L "$cupti_lib" "$BUNDLE_DIR/"
fi
grep -qx "/$BUNDLE_DIR/" .git/info/exclude 2>/dev/null || echo "/$BUNDLE_DIR/" >>.git/info/exclude
echo "bundle: $BUNDLE_DIR/bundle.tar.xz ($(du -h "$BUNDLE_DIR/bundle.tar.xz" | cut -f1)); libraries: $(ls "$stage/.device-lib" | tr '\n' ' ')"
