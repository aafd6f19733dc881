#!/usr/bin/env bash
# Multi-GPU tensor-parallel decode benchmark (issue: NCCL tensor parallelism), for a machine with
# NVIDIA GPUs: `qlm bench-decode` of a synthetic Llama-3-70B-shaped int4 GPTQ checkpoint at every
# TP in $TPS that the machine has GPUs for, with the ranks as threads of one process and (TP >= 2)
# as one process per GPU (--tp-procs). Then, on any machine:
#   python3 scripts/gen_tp_perf.py OUT/tp.jsonl --gpus "..."   regenerates docs/performance.md.
# Env: MODEL (default synthetic:llama3-70b:layers=8), TPS (default "1 2 4 8"), TOKENS (default 64),
#      MODES (default "threads procs"; TP 1 runs once), BENCH_TIMEOUT (seconds per run, default 300).
# Usage: scripts/bench_tp.sh   (writes $OUT/tp.jsonl and $OUT/tp_errors.txt)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/bench_tp}
mkdir -p "$OUT"
source scripts/device_env.sh

MODEL=${MODEL:-synthetic:llama3-70b:layers=8}
gpus=$(nvidia-smi -L | wc -l)
: >"$OUT/tp.jsonl"
for tp in ${TPS:-1 2 4 8}; do
  ((tp > gpus)) && { echo "tp $tp skipped: $gpus GPUs" >>"$OUT/tp_errors.txt"; continue; }
  modes=${MODES:-threads procs}
  ((tp == 1)) && modes=threads  # one rank: nothing to launch
  for mode in $modes; do
    flag=""
    [[ $mode == procs ]] && flag=--tp-procs
    # shellcheck disable=SC2086
    timeout "${BENCH_TIMEOUT:-300}" "$QLM_BUILD/qlm" bench-decode "$MODEL" --device cuda --dtype bf16 --tp "$tp" $flag --prompt-len 16 \
      --tokens "${TOKENS:-64}" --json >>"$OUT/tp.jsonl" 2>>"$OUT/tp_errors.txt" ||
      echo "bench-decode --tp $tp $mode failed" >>"$OUT/tp_errors.txt"
  done
done
tail -5 "$OUT/tp_errors.txt" 2>/dev/null
cat "$OUT/tp.jsonl"
