#!/usr/bin/env bash
# Runs the CPU linear-layer benchmarks on a Release build and writes one JSON file.
# Usage: scripts/bench_cpu.sh [OUT.json]   (default: build/release/bench_cpu.json)
# Env:   QLM_THREADS (default: all cores), BUILD_DIR (default: build/release), SKIP_BUILD=1.
# Then:  python3 scripts/gen_perf_tables.py OUT.json   updates docs/performance.md.
# Numbers are only meaningful on an otherwise idle machine: the load average before and after the
# run is recorded next to them.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/release}
OUT=${1:-$BUILD_DIR/bench_cpu.json}

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
    cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQLM_CUDA=OFF >/dev/null
  fi
  cmake --build "$BUILD_DIR" --target linear_bench qlm -j"$(nproc)"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

"$BUILD_DIR/bench/linear_bench" --benchmark_format=json --benchmark_out="$tmp/gbench.json" \
  --benchmark_out_format=json >/dev/null

# Extra shapes through the fixed `qlm bench-linear` contract.
: >"$tmp/bench_linear.jsonl"
run() { "$BUILD_DIR/qlm" bench-linear --json --threads "${QLM_THREADS:-0}" "$@" >>"$tmp/bench_linear.jsonl"; }
for m in 1 8 512; do
  iters=20
  [[ $m == 512 ]] && iters=3
  run --format gptq --bits 4 --group 128 --k 14336 --n 4096 --m $m --iters $iters
  run --format awq --bits 4 --group 128 --k 14336 --n 4096 --m $m --iters $iters
  run --format gptq --bits 4 --group 128 --act-order --k 14336 --n 4096 --m $m --iters $iters
  run --format gptq --bits 8 --group -1 --k 14336 --n 4096 --m $m --iters $iters
  run --format bf16 --k 14336 --n 4096 --m $m --iters $iters
done
# The float kernel on the same layer, beside the VNNI kernel the selector prefers where it exists.
if grep -qw avx512_vnni /proc/cpuinfo; then
  for m in 1 8 512; do
    iters=20
    [[ $m == 512 ]] && iters=3
    run --format gptq --bits 4 --group 128 --k 14336 --n 4096 --m $m --iters $iters --kernel cpu_fast_avx512
    run --format gptq --bits 8 --group -1 --k 14336 --n 4096 --m $m --iters $iters --kernel cpu_fast_avx512
  done
fi
run --format gptq --bits 4 --group 128 --k 4096 --n 4096 --m 1 --iters 50
run --format gptq --bits 4 --group 128 --k 4096 --n 14336 --m 1 --iters 20
run --format gptq --bits 3 --group 128 --k 4096 --n 4096 --m 1 --iters 20 --kernel cpu_fast
run --format gptq --bits 2 --group 128 --k 4096 --n 4096 --m 1 --iters 20 --kernel cpu_fast
# One thread: min_cpu_us is the undisturbed single-core time even on a busy machine.
for m in 1 8 512; do
  iters=20
  [[ $m == 512 ]] && iters=3
  "$BUILD_DIR/qlm" bench-linear --json --threads 1 --format gptq --bits 4 --group 128 --k 14336 --n 4096 --m $m \
    --iters $iters >>"$tmp/bench_linear.jsonl"
done
"$BUILD_DIR/qlm" bench-linear --json --threads 1 --format fp32 --k 14336 --n 4096 --m 512 --iters 3 >>"$tmp/bench_linear.jsonl"

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$tmp/gbench.json" "$tmp/bench_linear.jsonl" "$OUT" "$load_before" "$load_after" <<'PY'
import json, platform, subprocess, sys, datetime
gbench, lines, out, before, after = sys.argv[1:6]
cpu = "unknown"
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
result = {
    "date": datetime.date.today().isoformat(),
    "cpu": cpu,
    "cores": len([l for l in open("/proc/cpuinfo") if l.startswith("processor")]),
    "load_before": before,
    "load_after": after,
    "google_benchmark": json.load(open(gbench)),
    "bench_linear": [json.loads(l) for l in open(lines) if l.strip()],
}
with open(out, "w") as f:
    json.dump(result, f, indent=1)
print(f"wrote {out} (load {before} -> {after})")
PY
