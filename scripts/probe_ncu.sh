#!/usr/bin/env bash
# Per-kernel device times under Nsight Compute (investigation runs, docs/fp8-kernel-notes.md and
# docs/w4a16-kernel-notes.md): the FP8 layer of qlm and torch._scaled_mm at one shape, and one
# eager decode step of the synthetic Llama-3-8B int4 model; on request, one MoE layer's kernels. Raw CSVs and summaries
# (ncu_summary.py) in $OUT.
# Env: K N M (FP8 shape, default 14336 4096 1024); PARTS (default "fp8 decode"; "moe" adds the per-kernel times of the
#      int4 MoE layer at one token, `qlm bench-moe --device cuda`, every launch of its calls); MOE_SHAPES (bench-moe
#      shapes for "moe", default mixtral-8x7b).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/probe_ncu}
mkdir -p "$OUT"
source scripts/device_env.sh
NCU="ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw"
K=${K:-14336} N=${N:-4096} M=${M:-1024}
PARTS=${PARTS:-fp8 decode}
if [[ " $PARTS " == *" fp8 "* ]]; then
timeout 90 $NCU "$QLM_BUILD/qlm" bench-linear --device cuda --dtype bf16 --format fp8 --k "$K" --n "$N" --m "$M" \
  --iters 2 --timing events --rotate 1 >"$OUT/fp8_qlm.csv" 2>&1
timeout 90 $NCU python3 -c "
import torch
k, n, m = $K, $N, $M
w = torch.randn(n, k, device='cuda').to(torch.float8_e4m3fn)
x = torch.randn(m, k, device='cuda', dtype=torch.bfloat16)
sx = x.abs().amax(dim=1, keepdim=True).float() / 448
xq = (x.float() / sx).clamp(-448, 448).to(torch.float8_e4m3fn)
sw = torch.rand(1, n, device='cuda') + 0.5
for _ in range(3): torch._scaled_mm(xq, w.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)
torch.cuda.synchronize()
" >"$OUT/fp8_torch.csv" 2>&1
for f in fp8_qlm fp8_torch; do echo "== $f"; python3 scripts/ncu_summary.py "$OUT/$f.csv" --top 8; done
fi
if [[ " $PARTS " == *" decode "* ]]; then
# One decode step: prompt 4, 1 token, eager; the warm-up runs the same, so the last launches are
# the timed run's decode step.
timeout 240 $NCU "$QLM_BUILD/qlm" bench-decode synthetic:llama3-8b --device cuda --dtype bf16 --prompt-len 4 \
  --tokens 1 --cuda-graph off --tmp /tmp >"$OUT/decode.csv" 2>&1
echo "== decode step (last 452 launches)"; python3 scripts/ncu_summary.py "$OUT/decode.csv" --last 452 --top 25
fi
if [[ " $PARTS " == *" moe "* ]]; then
  # One warm-up, two routed and two dense calls at M = 1: the summary counts launches per kernel over all of them.
  for shape in ${MOE_SHAPES:-mixtral-8x7b}; do
    timeout 120 $NCU "$QLM_BUILD/qlm" bench-moe --device cuda --shape "$shape" --format gptq --bits 4 --group 128 \
      --m 1 --iters 2 >"$OUT/moe_$shape.csv" 2>&1
    echo "== moe ($shape int4, M = 1: every launch of the run)"
    python3 scripts/ncu_summary.py "$OUT/moe_$shape.csv" --top 25
  done
fi
