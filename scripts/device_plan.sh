#!/usr/bin/env bash
# Runs a plan of steps in one `device` call under a deadline, so that one slow or hung step cannot take the
# call's (and the session's) device time with it: each step has its own time limit, a step whose limit would
# pass the deadline is skipped (and said so), and every step's output lands in $OUT/<name>.log with a summary
# in $OUT/plan.txt (also printed). The device tool brings back at most 8 files from $OUT, so each step's own
# files ($OUT/NAME/...) are packed into one $OUT/steps.tar.gz at the end (tar -xzf it to read them): the
# summary, one log per step and the archive come back for plans of up to 6 steps.
#
# Plan: one step per line, "LIMIT_S NAME COMMAND..." (blank lines and lines starting with # ignored); COMMAND
# runs under bash in the repo root with OUT set to $OUT/NAME. From a file (PLAN=path) or standard input.
# Env: DEADLINE_S  seconds from the start by which every step must be done (default 570: under the device
#                  tool's 600 s per call, with room to copy $OUT back)
# Usage (through the device tool, bundle carried):
#   scripts/device_plan.sh <<'EOF'
#   200 check QLM_GPU_TEST_TIMEOUT=170 QLM_GPU_PROCS_TIMEOUT=20 scripts/gpu_check.sh
#   240 decode RUN_TIMEOUT=150 RUNS="new|synthetic:llama3-8b|16|128|;..." scripts/bench_decode_ab.sh
#   EOF
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-build/device_plan}
DEADLINE_S=${DEADLINE_S:-570}
mkdir -p "$OUT"
summary="$OUT/plan.txt"
: >"$summary"
start=$(date +%s)
plan=$(if [[ -n ${PLAN:-} ]]; then cat "$PLAN"; else cat; fi)
while read -r limit name command; do
  [[ -z ${limit:-} || $limit == \#* ]] && continue
  if ! [[ $limit =~ ^[0-9]+$ && -n ${name:-} && -n ${command:-} ]]; then
    echo "bad plan line (want 'LIMIT_S NAME COMMAND...'): $limit $name $command" | tee -a "$summary"
    continue
  fi
  now=$(date +%s)
  if ((now - start + limit > DEADLINE_S)); then
    echo "$name: skipped (limit ${limit} s would pass the ${DEADLINE_S} s deadline at $((now - start)) s)" | tee -a "$summary"
    continue
  fi
  mkdir -p "$OUT/$name"
  OUT="$OUT/$name" timeout -k 5 "$limit" bash -c "$command" >"$OUT/$name.log" 2>&1
  rc=$?
  took=$(($(date +%s) - now))
  case $rc in
    0) verdict="ok" ;;
    124 | 137) verdict="TIMED OUT at its ${limit} s limit" ;;
    *) verdict="exit $rc" ;;
  esac
  echo "$name: $verdict in ${took} s" | tee -a "$summary"
done <<<"$plan"
steps=()
for dir in "$OUT"/*/; do
  [[ -d $dir ]] && steps+=("$(basename "$dir")")
done
if ((${#steps[@]})); then
  tar -czf "$OUT/steps.tar.gz" -C "$OUT" "${steps[@]}" && (cd "$OUT" && rm -rf "${steps[@]}")
fi
echo "plan done in $(($(date +%s) - start)) s" | tee -a "$summary"
