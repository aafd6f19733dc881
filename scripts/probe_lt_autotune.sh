#!/usr/bin/env bash
# One `device` call measuring cuBLASLt algorithm tuning (kernels/cuda/lt_algo_tuner.h) where cuBLASLt
# runs our large-M GEMMs: the FP8 and bf16 CUDA tests with tuning forced on, then `qlm bench-linear`
# for fp8 (the rule, the rule with tuning, cuBLASLt alone with tuning) and bf16 (without / with
# tuning) over the eight Llama-3 shapes, with torch's fp8 and bf16 peers in the same run
# (scripts/bench_gpu_torch.py), and every candidate's time (QLM_LT_AUTOTUNE_LOG=1). W4_MS (with
# W4_VARIANTS, W4_SHAPES) adds a W4A16 sweep (scripts/sweep_w4a16.sh) to the same call.
# Usage (device tool, bundle carried): OUT=$OUT scripts/probe_lt_autotune.sh   -> $OUT/probe.tgz + stdout
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/probe_lt_autotune}
R=$(mktemp -d)
source scripts/device_env.sh
tests="$QLM_BUILD/tests/qlm_tests"
QLM_LT_AUTOTUNE=1 timeout "${TEST_TIMEOUT:-200}" "$tests" --gtest_filter="${TESTS:-CudaScaledMM*:CudaDense*:*LtAutotune*}" \
  >"$R/tests_tuned.log" 2>&1
echo "tests with QLM_LT_AUTOTUNE=1 exit $?: $(grep -E '^\[  (PASSED|FAILED)' "$R/tests_tuned.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' "$R/tests_tuned.log" | head -20
log="QLM_LT_AUTOTUNE_LOG=1"
FORMAT="--format fp8" MS=${FP8_MS:-128,256,512,1024} BENCH_TIMEOUT=90 OUT="$R/fp8" \
  VARIANTS="rule;tuned=QLM_LT_AUTOTUNE=1 $log;lt=QLM_FP8_CUTLASS_CONFIG=off QLM_LT_AUTOTUNE=1 $log" \
  timeout "${FP8_TIMEOUT:-240}" scripts/sweep_w4a16.sh >/dev/null
cat "$R/fp8/summary.txt"
FORMAT="--format bf16" MS=${BF16_MS:-64,256,1024} BENCH_TIMEOUT=90 OUT="$R/bf16" \
  VARIANTS="rule;tuned=QLM_LT_AUTOTUNE=1 $log" timeout "${BF16_TIMEOUT:-150}" scripts/sweep_w4a16.sh >/dev/null
cat "$R/bf16/summary.txt"
if [[ -n ${W4_MS:-} ]]; then
  MS=$W4_MS BENCH_TIMEOUT=60 OUT="$R/w4" SHAPES=${W4_SHAPES:-"4096:28672 8192:10240 8192:57344 28672:8192"} \
    VARIANTS=${W4_VARIANTS:-rule} timeout "${W4_TIMEOUT:-120}" scripts/sweep_w4a16.sh >/dev/null
  cat "$R/w4/summary.txt"
fi
timeout "${TORCH_TIMEOUT:-150}" python3 scripts/bench_gpu_torch.py --peers torch_scaled_mm_fp8,torch_bf16 \
  --ms "${FP8_MS:-128,256,512,1024},64" --out "$R/torch.jsonl" 2>"$R/torch_err.txt"
python3 - "$R/torch.jsonl" <<'PY'
import json, sys
rows = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("kind") == "peer" and "median_us" in r:
        rows.setdefault((r["impl"], r["k"], r["n"]), []).append(f"{r['m']}:{r['median_us']:.1f}")
for (impl, k, n), v in rows.items():
    print(f"{k} x {n} {impl}: " + "  ".join(v))
PY
mkdir -p "$OUT"
tar -C "$R" -czf "$OUT/probe.tgz" .
rm -rf "$R"
