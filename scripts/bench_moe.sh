#!/usr/bin/env bash
# Fused-MoE layer benchmark: `qlm bench-moe` at Mixtral-8x7B (H 4096, I 14336, 8 experts, top-2) and
# Qwen3-30B-A3B (H 2048, I 768, 128 experts, top-8) expert shapes, bf16 and GPTQ int4 g128 experts,
# M = 1, 16, 256, one JSON line each, after a first line {"meta": ...} with the machine's load.
# scripts/gen_moe_perf.py turns the files into the moe region of docs/performance.md.
#
# Usage: scripts/bench_moe.sh cpu  [OUT.jsonl]   (default docs/perf-data/moe_cpu.jsonl; QLM=path/to/qlm)
#        scripts/bench_moe.sh cuda [OUT.jsonl]   on the GPU machine (after `source scripts/device_env.sh`,
#                                                which sets QLM_BUILD); default $OUT/moe_cuda.jsonl or
#                                                docs/perf-data/moe_cuda.jsonl
# Env:   ITERS (default 5 on the CPU, 20 on CUDA), THREADS (CPU, 0 = all cores)
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE=${1:-cpu}
QLM=${QLM:-${QLM_BUILD:-build/release}/qlm}
if [[ $DEVICE == cuda ]]; then
  DEFAULT_OUT=${OUT:-docs/perf-data}/moe_cuda.jsonl
  ITERS=${ITERS:-20}
else
  DEFAULT_OUT=docs/perf-data/moe_cpu.jsonl
  ITERS=${ITERS:-5}
fi
OUTF=${2:-$DEFAULT_OUT}
mkdir -p "$(dirname "$OUTF")"
if [[ $DEVICE == cuda ]]; then
  machine=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
else
  machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
fi
printf '{"meta": {"device": "%s", "machine": "%s", "date": "%s", "load_before": "%s"}}\n' "$DEVICE" "$machine" \
  "$(date -u +%Y-%m-%dT%H:%MZ)" "$(cut -d' ' -f1-3 /proc/loadavg)" >"$OUTF"
for shape in mixtral-8x7b qwen3-30b-a3b; do
  for format in bf16 gptq; do
    "$QLM" bench-moe --shape "$shape" --format "$format" --bits 4 --group 128 --m 1,16,256 --device "$DEVICE" \
      --iters "$ITERS" --threads "${THREADS:-0}" --json | tee -a "$OUTF"
  done
done
printf '{"meta_end": {"load_after": "%s"}}\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUTF"
