#!/usr/bin/env bash
# GPU side-by-side benchmark (issue: CUDA backend), for a machine with an NVIDIA GPU: qlm's CUDA
# kernels through `qlm bench-linear --device cuda` and the peers of scripts/bench_gpu_torch.py, on
# Llama-3-8B and 70B layer shapes x M in {1, 16, 64, 256, 1024}, in one run. Then, on any machine:
#   python3 scripts/gen_gpu_perf.py OUT/torch.jsonl OUT/qlm.jsonl --decode OUT/decode.jsonl
# regenerates docs/performance.md. Also times whole-model decode (qlm bench-decode) of synthetic
# Llama-3-8B / 70B-shaped int4 checkpoints.
# Env: FORMATS (default "bf16 gptq fp8 int8"): the qlm formats to time; DECODE_GRAPHS (default
# "on off"): the --cuda-graph settings of the decode runs; DECODE=0 skips them, TORCH=0 the peers.
# Usage: scripts/bench_gpu.sh   (writes $OUT/torch.jsonl, qlm.jsonl, decode.jsonl, gpu_perf.md)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/bench_gpu}
mkdir -p "$OUT"
source scripts/device_env.sh

MS=1,16,64,256,1024
: >"$OUT/qlm.jsonl"
shapes="4096:6144 4096:4096 4096:28672 14336:4096 8192:10240 8192:8192 8192:57344 28672:8192"
for shape in $shapes; do
  k=${shape%%:*} n=${shape##*:}
  for f in ${FORMATS:-bf16 gptq fp8 int8}; do
    fmt="--format $f"
    [[ $f == gptq ]] && fmt="--format gptq --bits 4 --group 128"
    # shellcheck disable=SC2086
    "$QLM_BUILD/qlm" bench-linear --device cuda --dtype bf16 $fmt --k "$k" --n "$n" --m $MS --iters 10 --json \
      >>"$OUT/qlm.jsonl" 2>>"$OUT/qlm_errors.txt" || echo "qlm bench-linear $fmt k=$k n=$n failed" >>"$OUT/qlm_errors.txt"
  done
done
[[ ${TORCH:-1} == 1 ]] && python3 scripts/bench_gpu_torch.py --out "$OUT/torch.jsonl"
# Whole-model decode: Llama-3-8B-shaped int4 GPTQ (all 32 layers) and 70B-shaped (8 of 80 layers),
# random weights written to a temporary directory on the machine.
: >"$OUT/decode.jsonl"
[[ ${DECODE:-1} == 1 ]] && for model in synthetic:llama3-8b synthetic:llama3-70b:layers=8; do
  for graph in ${DECODE_GRAPHS:-on off}; do
    "$QLM_BUILD/qlm" bench-decode "$model" --device cuda --dtype bf16 --prompt-len 16 --tokens 128 --json \
      --cuda-graph "$graph" >>"$OUT/decode.jsonl" 2>>"$OUT/qlm_errors.txt" ||
      echo "bench-decode $model --cuda-graph $graph failed" >>"$OUT/qlm_errors.txt"
  done
done
tail -5 "$OUT/qlm_errors.txt" 2>/dev/null
# The table needs the peers' file (TORCH=0 leaves only qlm.jsonl, e.g. for gen_gpu_perf.py --qlm-rerun).
if [[ -s "$OUT/torch.jsonl" ]]; then
  python3 scripts/gen_gpu_perf.py "$OUT/torch.jsonl" "$OUT/qlm.jsonl" --decode "$OUT/decode.jsonl" --stdout |
    tee "$OUT/gpu_perf.md"
fi
