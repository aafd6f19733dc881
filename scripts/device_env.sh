# Sourced by the GPU scripts: unpacks $BUNDLE_DIR/bundle.tar.xz (default .device/) when present (binaries built elsewhere
# by scripts/device_bundle.sh) or builds build/gpu for sm_90 here, and exports QLM_BUILD and the
# library path. Keeps NVLink multicast off (NCCL_NVLS_ENABLE=0) as the shared GPU hosts require.
export NCCL_NVLS_ENABLE=0
BUNDLE_DIR=${BUNDLE_DIR:-.device}
if [[ -f "$BUNDLE_DIR/bundle.tar.xz" ]]; then
  tar -xJf "$BUNDLE_DIR/bundle.tar.xz"
  QLM_BUILD=${QLM_BUILD:-build/device}
  nccl_dir=$(dirname "$(find /usr/local/cuda*/lib* /opt/torch/.venv -name 'libnccl.so.2' 2>/dev/null | head -1)" 2>/dev/null)
  export LD_LIBRARY_PATH="$PWD/.device-lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${nccl_dir:-.}:${LD_LIBRARY_PATH:-}"
else
  QLM_BUILD=build/gpu
  cmake -S . -B "$QLM_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQLM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
    cmake --build "$QLM_BUILD" --target qlm qlm_tests qlm_my_quant_plugin -j"$(nproc)" >/dev/null || exit 1
fi
export QLM_BUILD
