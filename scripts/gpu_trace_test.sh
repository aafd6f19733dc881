#!/usr/bin/env bash
# Runs GPU tests one at a time with QLM_TEST_TRACE=1 (tests that support it print each kernel run before it starts)
# under a time limit each, and prints the last trace lines of any test that times out: which run hangs.
# Usage (on the GPU machine, bundle carried):  scripts/gpu_trace_test.sh GTEST_FILTER [EXTRA_ENV...]
#   e.g. TEST_TIMEOUT=40 scripts/gpu_trace_test.sh '*Fp8FastTest*' QLM_FP8_FAST_PDL=0
# Env: TEST_TIMEOUT seconds per test (default 60). Logs: $OUT/<test>.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu_trace}
mkdir -p "$OUT"
source scripts/device_env.sh
filter=$1
shift
tests="$QLM_BUILD/tests/qlm_tests"
for t in $("$tests" --gtest_filter="$filter" --gtest_list_tests | awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}'); do
  log="$OUT/${t//\//_}.log"
  start=$(date +%s)
  env QLM_TEST_TRACE=1 "$@" timeout -k 5 "${TEST_TIMEOUT:-60}" "$tests" --gtest_filter="$t" >"$log" 2>&1
  rc=$?
  echo "$t: rc $rc in $(($(date +%s) - start)) s ${*:-}"
  if ((rc != 0)); then grep -E '^run |Failure|error' "$log" | tail -4 | sed 's/^/    /'; fi
done
