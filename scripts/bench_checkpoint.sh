#!/usr/bin/env bash
# Runs the checkpoint benchmark (header parse of a sparse 1,000-tensor 10 GB checkpoint, and
# --verify-data throughput against `cat`) and regenerates its section of docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build/release}
[[ "${SKIP_BUILD:-0}" == 1 ]] || cmake --build "$build" --target checkpoint_bench
mkdir -p out
"$build/bench/checkpoint_bench" --benchmark_format=json --benchmark_out=out/checkpoint_bench.json \
  --benchmark_out_format=json >/dev/null
python3 scripts/gen_checkpoint_perf.py out/checkpoint_bench.json docs/performance.md
