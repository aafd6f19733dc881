#!/usr/bin/env bash
# Builds the libFuzzer targets with clang + ASan/UBSan in build/fuzz and runs each for N seconds
# (default 20) from its seed corpus in fuzz/corpus/<target>. New inputs go to build/fuzz/work/, so
# the committed seeds stay unchanged. Exits non-zero on the first crash (reproducer in build/fuzz/).
set -euo pipefail
seconds="${1:-20}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build/fuzz"
targets=(fuzz_safetensors fuzz_index fuzz_config fuzz_tokenizer)

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DQLM_FUZZ=ON -DQLM_SANITIZE=ON -DQLM_CUDA=OFF -DQLM_TESTS=OFF -DQLM_BENCH=OFF >/dev/null
cmake --build "$build" -j"${QLM_JOBS:-2}" --target "${targets[@]}"

status=0
for target in "${targets[@]}"; do
  work="$build/work/$target"
  mkdir -p "$work"
  echo "== $target: ${seconds}s"
  if ! (cd "$build" && "$build/fuzz/$target" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
          -timeout=10 -print_final_stats=1 "$work" "$root/fuzz/corpus/$target" 2>"$build/$target.log"); then
    echo "!! $target failed; see $build/$target.log"
    tail -40 "$build/$target.log"
    status=1
  else
    grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)|#[0-9]+.*DONE" "$build/$target.log" || tail -3 "$build/$target.log"
  fi
done
exit $status
