#!/usr/bin/env bash
# Sets up, builds and runs every CPU test: the release suite, the same suite under ASan+UBSan,
# and a short fuzzing run of each parser. QLM_SKIP_ASAN=1 / QLM_SKIP_FUZZ=1 skip those parts.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each part says how long it took (CI's budget: keep the whole run under 30 minutes on 2 cores).
phase_start=$(date +%s)
took() {
  echo "== $1 took $(($(date +%s) - phase_start)) s"
  phase_start=$(date +%s)
}
scripts/setup.sh
took "setup"
jobs=${QLM_JOBS:-$(nproc)}

echo "== release build and tests"
scripts/build.sh release
ctest --preset release -j "$jobs"
took "release build and tests"

if [[ "${QLM_SKIP_ASAN:-0}" != 1 ]]; then
  echo "== ASan+UBSan build and tests"
  scripts/build.sh asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --preset asan -j "$jobs"
  took "ASan+UBSan build and tests"
fi

if [[ "${QLM_SKIP_FUZZ:-0}" != 1 && -x scripts/fuzz.sh ]]; then
  echo "== short fuzzing run"
  scripts/fuzz.sh "${QLM_FUZZ_SECONDS:-15}"
  took "fuzzing"
fi
echo "== all tests passed"
