#!/usr/bin/env bash
# Decode attention alone (`qlm bench-attention`) in one GPU run: the Llama-3-8B and 70B head shapes over
# contexts from 16 to 32768 slots, a cache right after a growth (capacity x2), the fp8 cache, and the
# per-(token, head) form (QLM_ATTENTION_DECODE=0) beside the decode kernel. One JSON line per point in
# $OUT/attention.jsonl with a "variant" field; a table on stdout.
#
# Env: RUNS  "name|ENV ENV|bench-attention options;..." (default below)
# Usage (through the device tool, bundle carried): OUT=$OUT scripts/bench_attention.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/bench_attention}
mkdir -p "$OUT"
source scripts/device_env.sh
ctx=16,256,1024,4096,8192,16384,32768
default_runs="decode||--shape llama3-8b --context $ctx;"
default_runs+="decode||--shape llama3-70b --context $ctx;"
default_runs+="decode-cap2||--shape llama3-8b --capacity-factor 2 --context $ctx;"
default_runs+="decode-fp8||--shape llama3-8b --kv-dtype fp8 --context $ctx;"
default_runs+="per-head|QLM_ATTENTION_DECODE=0|--shape llama3-8b --context $ctx"
IFS=';' read -r -a runs <<<"${RUNS:-$default_runs}"
: >"$OUT/attention.jsonl"
for r in "${runs[@]}"; do
  IFS='|' read -r name settings args <<<"$r"
  # shellcheck disable=SC2086
  env $settings timeout "${RUN_TIMEOUT:-240}" "$QLM_BUILD/qlm" bench-attention $args --json 2>>"$OUT/attention_err.txt" |
    python3 scripts/tag_jsonl.py "$name" "$settings" >>"$OUT/attention.jsonl" || echo "$name $args failed" >>"$OUT/attention_err.txt"
done
python3 - "$OUT/attention.jsonl" <<'PY'
import json, sys
print("| variant | shape | kv | context | capacity | chunks | us | floor us | % floor |")
print("|---|---|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"| {r['variant']} | {r['shape']} | {r['kv_dtype']} | {r['context']} | {r['capacity']} | {r['chunks']} | "
          f"{r['us']:.2f} | {r['floor_us']:.2f} | {100 * r['floor_fraction']:.0f} |")
PY
