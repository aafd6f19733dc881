#!/usr/bin/env bash
# GPU correctness run, for a machine with an NVIDIA GPU (CI has none): every CUDA test (suites named
# Cuda*, and parameterised ones */Cuda*: kernels vs the CPU float64 references on fresh random data, odd shapes, poisoned outputs;
# model fixtures on the GPU vs the CPU path), a CLI smoke run, and a summary table.
#
# Usage (on the GPU machine, from the repo root):  scripts/gpu_check.sh [GTEST_FILTER]
#   With .device/bundle.tar.xz present (made by scripts/device_bundle.sh on a build machine) it runs
#   the bundled binaries; otherwise it builds build/gpu (sm_90) itself, which needs every -dev package
#   of scripts/setup.sh. Results go to $OUT (the device tool's output folder) or build/gpu_check.
set -uo pipefail
cd "$(dirname "$0")/.."
FILTER=${1:-Cuda*:*/Cuda*}
OUT=${OUT:-build/gpu_check}
mkdir -p "$OUT"
source scripts/device_env.sh

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
start=$(date +%s)
# The multi-process tests (CudaTpProcs.*: child processes, NCCL across processes) run on their own,
# so that one which hangs until its time limit cannot take the other results with it.
tests="$QLM_BUILD/tests/qlm_tests"
procs=$("$tests" --gtest_filter="$FILTER" --gtest_list_tests | awk '/^[^ ]/ {suite=$1} /^  / && suite == "CudaTpProcs." {printf "%s%s%s", sep, suite, $1; sep=":"}')
if [[ $FILTER == *-* ]]; then rest="$FILTER:CudaTpProcs.*"; else rest="$FILTER-CudaTpProcs.*"; fi
limit=${QLM_GPU_TEST_TIMEOUT:-300}
timeout -k 10 "$limit" "$tests" --gtest_filter="$rest" --gtest_output="json:$OUT/gpu_tests.json" >"$OUT/gpu_tests.log" 2>&1
status=$?
reports=("$OUT/gpu_tests.json")
if [[ -n $procs ]]; then
  timeout -k 10 "${QLM_GPU_PROCS_TIMEOUT:-240}" "$tests" --gtest_filter="$procs" \
    --gtest_output="json:$OUT/gpu_tests_procs.json" >"$OUT/gpu_tests_procs.log" 2>&1
  procs_status=$?
  ((status == 0)) && status=$procs_status
  reports+=("$OUT/gpu_tests_procs.json")
fi
grep -hE '^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|error|Expected|Which is|actual' "$OUT"/gpu_tests*.log | head -150
echo "gtest exit $status after $(( $(date +%s) - start )) s"

echo "--- CLI on the GPU"
"$QLM_BUILD/qlm" generate models/default --device cuda --prompt "The secret of a happy life is" --max-tokens 40 \
  --temperature 0 2>&1 | tail -6

python3 scripts/gpu_test_summary.py "${reports[@]}" | tee "$OUT/summary.md"
exit $status
