#!/usr/bin/env bash
# Nsight Compute sections of the decode attention kernels (`qlm bench-attention`, one replay of two layers,
# caches flushed between kernels, clocks not locked) at a few contexts: where the decode step's attention
# spends its time (docs/w4a16-kernel-notes.md, end to end). Text reports in $OUT/attention_ncu_<ctx>.txt.
# Env: CONTEXTS (default "16 4096"), SHAPE (llama3-8b).
# Usage (through the device tool, bundle carried): OUT=$OUT scripts/probe_attention_ncu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/probe_attention_ncu}
mkdir -p "$OUT"
source scripts/device_env.sh
for ctx in ${CONTEXTS:-16 4096}; do
  timeout 120 ncu --clock-control none --cache-control all -k regex:attention \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats \
    "$QLM_BUILD/qlm" bench-attention --shape "${SHAPE:-llama3-8b}" --context "$ctx" --layers 2 --iters 1 \
    >"$OUT/attention_ncu_$ctx.txt" 2>&1
  grep -E "attention|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issued Warp|No Eligible|Stall|Block Limit" \
    "$OUT/attention_ncu_$ctx.txt" | head -60
done
