#!/usr/bin/env bash
# Tuning run for the FP8 W8A8 large-M path (cuda_scaled_mm_fp8_fast, M > 16): every CUTLASS tile
# configuration, and the cuBLASLt path, against torch._scaled_mm, on the Llama-3
# 8B/70B layer shapes, in one run on a GPU machine. Output: $OUT/fp8_configs.jsonl (qlm, one line per
# config x shape with "config" added) and $OUT/fp8_torch.jsonl. The rule in fp8_cutlass_config_for
# (src/kernels/cuda/scaled_mm_fp8_fast.cc) is chosen from this table (docs/fp8-kernel-notes.md).
# Env: MS, SHAPES (K:N ...), CONFIGS (rule, off = cuBLASLt, or CUTLASS config names), PROMOTIONS
# (QLM_FP8_PROMOTION values, default 4), TORCH=0 to skip the torch peers.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/bench_fp8}
mkdir -p "$OUT"
source scripts/device_env.sh
MS=${MS:-1,16,32,64,128,256,512,1024}
SHAPES=${SHAPES:-4096:6144 4096:4096 4096:28672 14336:4096 8192:10240 8192:8192 8192:57344 28672:8192}
: >"$OUT/fp8_configs.jsonl"
for shape in $SHAPES; do
  k=${shape%%:*} n=${shape##*:}
  for config in ${CONFIGS:-rule off swap128x32 swap128x64 swap64x128c12 swap128x128c12}; do
    if [[ $config == rule ]]; then unset QLM_FP8_CUTLASS_CONFIG; else export QLM_FP8_CUTLASS_CONFIG=$config; fi
    # The rule's own promotion interval unless PROMOTIONS is set ("promotion":0 in the records); a forced
    # configuration promotes every 4 k-steps by default (as the kernel does for a forced one).
    promotions=${PROMOTIONS:-4}
    [[ $config == rule && -z ${PROMOTIONS:-} ]] && promotions=0
    [[ $config == off ]] && promotions=0  # cuBLASLt: no CUTLASS promotion
    for p in $promotions; do
      if ((p > 0)); then export QLM_FP8_PROMOTION=$p; else unset QLM_FP8_PROMOTION; fi
      "$QLM_BUILD/qlm" bench-linear --device cuda --dtype bf16 --format fp8 --k "$k" --n "$n" \
        --m "$MS" --iters 10 --json |
        sed "s/^{/{\"config\":\"$config\",\"promotion\":$p,/" >>"$OUT/fp8_configs.jsonl" 2>>"$OUT/fp8_errors.txt"
    done
  done
done
unset QLM_FP8_CUTLASS_CONFIG QLM_FP8_PROMOTION
[[ ${TORCH:-1} == 1 ]] &&
  python3 scripts/bench_gpu_torch.py --out "$OUT/fp8_torch.jsonl" --ms "$MS" --peers torch_scaled_mm_fp8,torch_scaled_mm_fp8_with_quant
