#!/usr/bin/env bash
# Decode benchmarks of whole models on CPU (bench/model_bench.cc) to one JSON file: the tiny
# fixtures, the memory read bandwidth and, with QLM_BENCH_8B=1 (the default here), a generated
# Llama-3-8B-shaped int4 GPTQ checkpoint (~4.9 GB written to a temporary directory and removed).
# Usage: scripts/bench_models.sh [OUT.json]   (default: $BUILD_DIR/bench_models.json)
# Env:   BUILD_DIR (default build/release), QLM_THREADS (default all cores), QLM_BENCH_8B (default 1),
#        QLM_BENCH_TMP (parent of the temporary checkpoint), SKIP_BUILD=1.
# Then:  python3 scripts/gen_model_perf.py OUT.json   updates docs/performance.md (cpu-model section).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/release}
OUT=${1:-$BUILD_DIR/bench_models.json}
export QLM_BENCH_8B=${QLM_BENCH_8B:-1}

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
    cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQLM_CUDA=OFF >/dev/null
  fi
  cmake --build "$BUILD_DIR" --target model_bench -j"$(nproc)"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
"$BUILD_DIR/bench/model_bench" --benchmark_format=json --benchmark_out="$tmp/gbench.json" \
  --benchmark_out_format=json >/dev/null
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$tmp/gbench.json" "$OUT" "$load_before" "$load_after" <<'PY'
import datetime, json, sys
gbench, out, before, after = sys.argv[1:5]
cpu = "unknown"
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
result = {
    "date": datetime.date.today().isoformat(),
    "cpu": cpu,
    "cores": sum(1 for l in open("/proc/cpuinfo") if l.startswith("processor")),
    "load_before": before,
    "load_after": after,
    "google_benchmark": json.load(open(gbench)),
}
with open(out, "w") as f:
    json.dump(result, f, indent=1)
print(f"wrote {out} (load {before} -> {after})")
PY
