#!/usr/bin/env bash
# Per-instruction stall sampling of one kernel launch under Nsight Compute (investigation runs,
# docs/w4a16-kernel-notes.md): for each probe, the SASS of the kernel with its warp-state samples
# ($OUT/<name>_sass.csv, `--page source --print-source sass`), the kernel's details page
# ($OUT/<name>_details.csv) and a summary (scripts/ncu_source_summary.py) in $OUT/<name>_summary.txt.
# Env: PROBES "name|kernel regex|env settings|bench-linear shape arguments;..." (default: the wgmma kernel at
#      M = 64 on 70b.gate_up; W4A16 g128 bf16 options, events timing and one weight copy are appended), SKIP (launches of the kernel to skip before the profiled one, default 2).
# Usage (through the device tool, bundle carried): OUT=$OUT scripts/probe_ncu_source.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/probe_ncu_source}
mkdir -p "$OUT"
source scripts/device_env.sh
W4="--device cuda --dtype bf16 --format gptq --bits 4 --group 128 --iters 2 --timing events --rotate 1"
IFS=';' read -r -a probes <<<"${PROBES:-t0_m64|wgmma_kernel||--k 8192 --n 57344 --m 64}"
for p in "${probes[@]}"; do
  IFS='|' read -r name regex settings args <<<"$p"
  rep="$OUT/$name"
  # shellcheck disable=SC2086
  env $settings timeout "${NCU_TIMEOUT:-240}" ncu --clock-control none -k "regex:$regex" -s "${SKIP:-2}" -c 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
    --section Occupancy --import-source no -f -o "$rep" "$QLM_BUILD/qlm" bench-linear $args $W4 \
    >"$rep.log" 2>&1 || echo "$name: ncu exit $?" >>"$OUT/errors.txt"
  ncu -i "$rep.ncu-rep" --page source --csv --print-source sass >"${rep}_sass.csv" 2>>"$OUT/errors.txt"
  ncu -i "$rep.ncu-rep" --page details --csv >"${rep}_details.csv" 2>>"$OUT/errors.txt"
  python3 scripts/ncu_source_summary.py "${rep}_sass.csv" >"${rep}_summary.txt" 2>&1
  rm -f "$rep.ncu-rep"
  echo "== $name"; head -60 "${rep}_summary.txt"
done
