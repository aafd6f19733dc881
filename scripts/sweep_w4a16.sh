#!/usr/bin/env bash
# W4A16 tuning sweep for one `device` call (docs/w4a16-kernel-notes.md): optional GPU tests, then
# `qlm bench-linear` over shapes x variants (environment settings), one compact line per (shape, variant)
# in $OUT/summary.txt (µs per M and the path taken), every record in $OUT/sweep.jsonl and what the runs
# printed on stderr (e.g. QLM_LT_AUTOTUNE_LOG=1's candidate times) in $OUT/stderr.log.
#
# Env: SHAPES   "K:N ..." (default: the eight Llama-3 8B / 70B layers)
#      MS       token counts (default 1,4,8,16,32,64,128,256)
#      VARIANTS "name=ENV ENV;name=ENV" — settings per variant, ';'-separated; "rule" alone: no settings
#               (default "rule"), e.g. "rule;stream=QLM_W4FAST_PATH=stream;late3=QLM_W4FAST_PATH=wgmma QLM_WGMMA_TILE=3 QLM_WGMMA_LATE=1"
#      FORMAT   bench-linear format options (default "--format gptq --bits 4 --group 128")
#      TESTS    a gtest filter to run first (e.g. '*Wna16Fast*'), unset: none
#      DEVICE   cuda (default) or cpu (to try the script without a GPU)
#      QLM_BASE a second bundle's folder (e.g. .device-base, carried too), unpacked into build/base; variants with
#               QLM_BUILD=build/base run it, e.g. VARIANTS="base=QLM_BUILD=build/base;new;base2=QLM_BUILD=build/base;new2"
# Usage (through the device tool, with the bundle of scripts/device_bundle.sh carried):
#   OUT=$OUT BUNDLE_DIR=.device-final VARIANTS="rule;stream=QLM_W4FAST_PATH=stream" scripts/sweep_w4a16.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/sweep_w4a16}
mkdir -p "$OUT"
if [[ ${DEVICE:-cuda} == cuda ]]; then
  source scripts/device_env.sh
else
  QLM_BUILD=${QLM_BUILD:-build/release}
fi
# A second bundle to compare against in the same run: QLM_BASE=.device-base unpacks it into build/base, which a
# variant names with QLM_BUILD=build/base.
if [[ -n ${QLM_BASE:-} ]]; then
  rm -rf build/base "$OUT/base_unpack" && mkdir -p "$OUT/base_unpack" &&
    tar -xJf "$QLM_BASE/bundle.tar.xz" -C "$OUT/base_unpack" && mv "$OUT/base_unpack/build/device" build/base &&
    rm -rf "$OUT/base_unpack" || { echo "could not unpack $QLM_BASE/bundle.tar.xz" >&2; exit 1; }
fi
S="$OUT/summary.txt"
: >"$S"
: >"$OUT/sweep.jsonl"
: >"$OUT/stderr.log"
if [[ -n ${TESTS:-} ]]; then
  timeout "${TEST_TIMEOUT:-300}" "$QLM_BUILD/tests/qlm_tests" --gtest_filter="$TESTS" >"$OUT/tests.log" 2>&1
  echo "tests ($TESTS) exit $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]' "$OUT/tests.log" | tr '\n' ' ')" >>"$S"
  grep -E '^\[  FAILED|Failure' "$OUT/tests.log" | head -20 >>"$S"
  cat "$S"
fi
shapes=${SHAPES:-"4096:6144 4096:4096 4096:28672 14336:4096 8192:10240 8192:8192 8192:57344 28672:8192"}
IFS=';' read -r -a variants <<<"${VARIANTS:-rule}"
for shape in $shapes; do
  k=${shape%%:*} n=${shape##*:}
  for v in "${variants[@]}"; do
    name=${v%%=*}
    settings=""
    [[ $v == *=* ]] && settings=${v#*=}
    # A variant's QLM_BUILD=DIR runs that build's qlm and library (another bundle unpacked there: QLM_BASE below).
    build=$QLM_BUILD
    for s in $settings; do [[ $s == QLM_BUILD=* ]] && build=${s#QLM_BUILD=}; done
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH="$PWD/$build:${LD_LIBRARY_PATH:-}" env $settings timeout "${BENCH_TIMEOUT:-120}" "$build/qlm" bench-linear --device "${DEVICE:-cuda}" \
      --dtype "${DTYPE:-bf16}" ${FORMAT:---format gptq --bits 4 --group 128} --k "$k" --n "$n" \
      --m "${MS:-1,4,8,16,32,64,128,256}" --iters "${ITERS:-10}" --json >"$OUT/last.jsonl" 2>"$OUT/last_err.txt" ||
      echo "$k x $n $name: bench-linear failed: $(tail -1 "$OUT/last_err.txt")" | tee -a "$S"
    python3 - "$OUT/last.jsonl" "$k x $n $name" >>"$S" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(sys.argv[2] + ": " + "  ".join(f"{r['m']}:{r['median_us']:.1f}/{r.get('path', '')}" for r in recs))
PY
    tail -1 "$S"
    sed "s/^{/{\"variant\":\"$name\",/" "$OUT/last.jsonl" >>"$OUT/sweep.jsonl"
    if [[ -s "$OUT/last_err.txt" ]]; then
      echo "== $k x $n $name" >>"$OUT/stderr.log"
      cat "$OUT/last_err.txt" >>"$OUT/stderr.log"
    fi
  done
done
rm -f "$OUT/last.jsonl" "$OUT/last_err.txt"
