#!/usr/bin/env bash
# Probe run (investigation of the FP8 large-M gap, docs/fp8-kernel-notes.md): torch._scaled_mm's time
# per weight distribution and its kernel names (probe_fp8_peer.py), qlm's FP8 layer at the same
# shapes, and per-kernel durations of both under Nsight Compute (quantizer vs GEMM).
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
if command -v ncu >/dev/null; then
  for shape in 14336:4096 8192:8192; do
    k=${shape%%:*} n=${shape##*:}
    echo "== qlm $k x $n"
      timeout 75 ncu --clock-control none --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size \
        --csv --page raw "$QLM_BUILD/qlm" bench-linear --device cuda --dtype bf16 --format fp8 --k "$k" --n "$n" \
        --m 1024 --iters 2 --timing events --rotate 1 2>&1 | grep -v '^==PROF==' | cut -c1-600 | tail -12
    echo "== torch $k x $n"
    timeout 75 ncu --clock-control none --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size \
      --csv --page raw python3 -c "
import torch
k, n, m = $k, $n, 1024
w = torch.randn(n, k, device='cuda').to(torch.float8_e4m3fn)
x = torch.randn(m, k, device='cuda', dtype=torch.bfloat16)
sx = x.abs().amax(dim=1, keepdim=True).float() / 448
xq = (x.float() / sx).clamp(-448, 448).to(torch.float8_e4m3fn)
sw = torch.rand(1, n, device='cuda') + 0.5
for _ in range(3): torch._scaled_mm(xq, w.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)
torch.cuda.synchronize()
" 2>&1 | grep -v '^==PROF==' | grep -i 'gemm\|cutlass\|sm90\|Kernel Name\|ID' | cut -c1-600 | tail -6
  done >"$OUT/ncu.txt" 2>&1
fi
echo "probe done"
