#!/usr/bin/env bash
# The decode rows of the GPU table (docs/perf-data/gpu_decode.jsonl, read by gen_gpu_perf.py --decode): bench-decode
# of the synthetic int4 Llama-3-8B (all 32 layers) and 70B (8 of 80 layers) at a 16-token prompt and 128 tokens, with
# the CUDA graph on and off, the 8B at a 4000-token prompt and 64 tokens (graph), and the Qwen3-30B-A3B MoE shape
# (8 of 48 layers, graph). Each synthetic checkpoint is written once (--keep-synthetic) and reused by its later runs.
# Env: TMP_DIR (where the checkpoints go, default /tmp/qlm-decode-rows).
# Usage (through the device tool, bundle carried): OUT=$OUT scripts/bench_decode_rows.sh   (writes $OUT/decode.jsonl)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-build/bench_decode_rows}
mkdir -p "$OUT"
source scripts/device_env.sh
keep=${TMP_DIR:-/tmp/qlm-decode-rows}
: >"$OUT/decode.jsonl"
run() {  # MODEL PROMPT TOKENS GRAPH
  "$QLM_BUILD/qlm" bench-decode "$1" --device cuda --dtype bf16 --prompt-len "$2" --tokens "$3" --cuda-graph "$4" \
    --keep-synthetic "$keep/${1//[:=]/_}" --json >>"$OUT/decode.jsonl" 2>>"$OUT/errors.txt" ||
    echo "bench-decode $* failed" | tee -a "$OUT/errors.txt"
}
for model in synthetic:llama3-8b synthetic:llama3-70b:layers=8; do
  for graph in on off; do run "$model" 16 128 "$graph"; done
done
run synthetic:llama3-8b 4000 64 on
run synthetic:qwen3-30b-a3b:layers=8 16 128 on
python3 -c "
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    print(f\"{d['model']:34} prompt {d['prompt_len']:5}  {d['decode_step'][:24]:24}  {d['decode_tok_s']:7.1f} tokens/s\")
" "$OUT/decode.jsonl"
