#!/usr/bin/env bash
# Nsight Compute sections (speed of light, occupancy, warp states) of the grouped MoE expert GEMMs of the int4
# Mixtral-shaped layer (`qlm bench-moe`), per variant and token count: $OUT/<variant>_m<M>.txt, the first two
# matching launches (w13 and w2 of the first call). For docs/moe-kernel-notes.md.
# Env: VARIANTS "name|VAR=value ...;..." (default "mma|"), MS (default "1 64"), KERNELS (ncu -k regex, default
#      "regex:mma_kernel|ring_kernel|gemm_kernel")
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/probe_moe_ncu}
mkdir -p "$OUT"
source scripts/device_env.sh
IFS=';' read -ra variants <<<"${VARIANTS:-mma|}"
for v in "${variants[@]}"; do
  name=${v%%|*}
  settings=${v#*|}
  for m in ${MS:-1 64}; do
    env $settings timeout 90 ncu --clock-control none -k "${KERNELS:-regex:mma_kernel|ring_kernel|gemm_kernel}" -c 2 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
      "$QLM_BUILD/qlm" bench-moe --device cuda --shape mixtral-8x7b --format gptq --bits 4 --group 128 --m "$m" \
      --iters 1 --timing events >"$OUT/${name}_m$m.txt" 2>&1
    echo "== $name M=$m"
    grep -E "mma_kernel|ring_kernel|gemm_kernel|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Issue Slots|Compute \(SM\)" \
      "$OUT/${name}_m$m.txt" | sed 's/  */ /g'
  done
done
