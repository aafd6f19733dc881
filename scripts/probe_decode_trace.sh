#!/usr/bin/env bash
# Where a decode step's time goes on the GPU, as the model runs it: every kernel of `qlm bench-decode` recorded by
# CUPTI's activity API (bench/probes/cupti_trace.cc, injected with CUDA_INJECTION64_PATH; the device machines have
# no Nsight Systems), the step replayed from its CUDA graph with programmatic dependent launch and warm caches; then
# scripts/decode_trace_summary.py cuts the trace into steps at the embedding kernel and sums each kernel kind per
# step. Unlike scripts/probe_ncu.sh (kernels serialised, caches flushed), this is the step as decoding sees it.
# Output in $OUT: <model>.csv (every kernel, memcpy and memset), <model>.txt (the summary).
# Env: MODELS (default "synthetic:llama3-8b synthetic:qwen3-30b-a3b:layers=8"), PROMPT (16), TOKENS (32), STEPS
#      (trailing steps summarised, default 16), TRACE_LIB (default .device/libqlm_cupti_trace.so, which
#      scripts/device_bundle.sh builds beside the bundle with the libcupti it links), EXTRA (more bench-decode
#      arguments).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/probe_trace}
mkdir -p "$OUT"
source scripts/device_env.sh
TRACE_LIB=${TRACE_LIB:-.device/libqlm_cupti_trace.so}
[[ -f $TRACE_LIB ]] || { echo "probe_decode_trace: no $TRACE_LIB (see the header)"; exit 1; }
lib_dir=$(cd "$(dirname "$TRACE_LIB")" && pwd)
MODELS=${MODELS:-synthetic:llama3-8b synthetic:qwen3-30b-a3b:layers=8}
for model in $MODELS; do
  name=$(echo "$model" | tr ':=' '__')
  CUDA_INJECTION64_PATH="$lib_dir/$(basename "$TRACE_LIB")" QLM_CUPTI_OUT="$OUT/$name.csv" \
    LD_LIBRARY_PATH="$lib_dir:$LD_LIBRARY_PATH" timeout 240 "$QLM_BUILD/qlm" bench-decode "$model" --device cuda \
    --dtype bf16 --prompt-len "${PROMPT:-16}" --tokens "${TOKENS:-32}" --tmp /tmp ${EXTRA:-} >"$OUT/$name.log" 2>&1 ||
    { echo "$model: bench-decode failed"; tail -5 "$OUT/$name.log"; continue; }
  tail -2 "$OUT/$name.log"
  python3 scripts/decode_trace_summary.py "$OUT/$name.csv" --steps "${STEPS:-16}" --title "$model" | tee "$OUT/$name.txt"
done
