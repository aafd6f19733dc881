#!/usr/bin/env bash
# Probe run (investigation of the FP8 large-M gap, docs/fp8-kernel-notes.md): torch._scaled_mm's time
# per weight distribution and its kernel names (probe_fp8_peer.py) and qlm's FP8 layer at the same
# shapes. Per-kernel durations of both under Nsight Compute: scripts/probe_ncu.sh.
# Usage on the GPU machine: OUT=... scripts/probe_fp8.sh   (after scripts/device_env.sh can find a bundle)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/probe_fp8}
mkdir -p "$OUT"
source scripts/device_env.sh
MS=${MS:-256,1024}
(cd scripts && timeout 200 python3 probe_fp8_peer.py --ms "$MS") >"$OUT/peer.txt" 2>&1
for shape in 4096:6144 4096:4096 4096:28672 14336:4096 8192:10240 8192:8192 8192:57344 28672:8192; do
  k=${shape%%:*} n=${shape##*:}
  "$QLM_BUILD/qlm" bench-linear --device cuda --dtype bf16 --format fp8 --k "$k" --n "$n" --m "$MS" --iters 10 --json
done >"$OUT/qlm.jsonl" 2>&1
echo "probe done"
