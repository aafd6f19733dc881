#!/usr/bin/env bash
# Whole-model decode under several settings in one GPU run (`qlm bench-decode`, one process per
# variant, the synthetic checkpoints written once and kept with --keep-synthetic), for A/B
# comparisons of runtime changes: one JSON line per run in $OUT/decode_ab.jsonl with a "variant"
# field, a table on stdout.
#
# Env: RUNS  "name|model|prompt-len|tokens|ENV ENV;..." (default below: the 8B and 8-layer 70B shapes
#            with a 16-token prompt, the 8B with a 4000-token one; QLM_PDL, QLM_ATTENTION_DECODE and
#            QLM_PREPARE_ATTENTION each off, and all three off: the decode step before them)
#      KEEP  where the synthetic checkpoints stay (default /tmp/qlm-synthetic)
# Usage (through the device tool, bundle carried): OUT=$OUT scripts/bench_decode_ab.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/decode_ab}
mkdir -p "$OUT"
source scripts/device_env.sh
KEEP=${KEEP:-/tmp/qlm-synthetic}
default_runs="new|synthetic:llama3-8b|16|128|;"
default_runs+="no-pdl|synthetic:llama3-8b|16|128|QLM_PDL=0;"
default_runs+="old-attn|synthetic:llama3-8b|16|128|QLM_ATTENTION_DECODE=0;"
default_runs+="separate-prep|synthetic:llama3-8b|16|128|QLM_PREPARE_ATTENTION=0;"
default_runs+="before|synthetic:llama3-8b|16|128|QLM_PDL=0 QLM_ATTENTION_DECODE=0 QLM_PREPARE_ATTENTION=0;"
default_runs+="stream-all|synthetic:llama3-8b|16|128|QLM_W4FAST_STREAM_MAX_M=16;"
default_runs+="new|synthetic:llama3-8b|4000|64|;"
default_runs+="before|synthetic:llama3-8b|4000|64|QLM_PDL=0 QLM_ATTENTION_DECODE=0 QLM_PREPARE_ATTENTION=0;"
default_runs+="new|synthetic:llama3-70b:layers=8|16|128|;"
default_runs+="before|synthetic:llama3-70b:layers=8|16|128|QLM_PDL=0 QLM_ATTENTION_DECODE=0 QLM_PREPARE_ATTENTION=0"
IFS=';' read -r -a runs <<<"${RUNS:-$default_runs}"
: >"$OUT/decode_ab.jsonl"
: >"$OUT/decode_ab_err.txt"
for r in "${runs[@]}"; do
  IFS='|' read -r name model prompt tokens settings <<<"$r"
  graph=on
  [[ $settings == *CUDA_GRAPH=off* ]] && graph=off && settings=${settings//CUDA_GRAPH=off/}
  keep="$KEEP/$(echo "$model" | tr ':=' '__')"
  echo "== $name $model prompt $prompt: $settings" >>"$OUT/decode_ab_err.txt"
  # shellcheck disable=SC2086
  env $settings timeout "${RUN_TIMEOUT:-240}" "$QLM_BUILD/qlm" bench-decode "$model" --device cuda --dtype bf16 \
    --prompt-len "$prompt" --tokens "$tokens" --cuda-graph "$graph" --keep-synthetic "$keep" --json \
    2>>"$OUT/decode_ab_err.txt" |
    python3 scripts/tag_jsonl.py "$name" "$settings" >>"$OUT/decode_ab.jsonl"
  rc=${PIPESTATUS[0]}
  if ((rc == 124 || rc == 137)); then
    echo "$name $model failed: timed out after ${RUN_TIMEOUT:-240} s (RUN_TIMEOUT; a hang, or a fresh machine writing the checkpoint)" >>"$OUT/decode_ab_err.txt"
  elif ((rc != 0)); then
    echo "$name $model failed: exit $rc" >>"$OUT/decode_ab_err.txt"
  fi
done
python3 - "$OUT/decode_ab.jsonl" <<'PY'
import json, sys
print("| model | prompt | variant | settings | step | tokens/s | ms/token |")
print("|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"| {r['model']} | {r['prompt_len']} | {r['variant']} | {r['settings'] or '-'} | {r.get('decode_step', '')} | "
          f"{r['decode_tok_s']:.1f} | {r['decode_ms_per_token']:.3f} |")
PY
