#!/usr/bin/env bash
# The int4 MoE layer (`qlm bench-moe`, GPTQ g128 experts, Mixtral-8x7B and Qwen3-30B-A3B shapes) under several
# environment settings in one run, for choosing between kernels and rules: one JSON file per variant,
# $OUT/moe_<name>.jsonl, and a table of MoE µs per (shape, M) with one column per variant.
#
# Usage (GPU machine, bundle carried): OUT=dir VARIANTS="mma;gemv=QLM_MOE_WNA16=gemv" scripts/bench_moe_variants.sh
# Env:   VARIANTS  "name=VAR=value VAR2=value;..." as scripts/sweep_w4a16.sh takes them (a name alone runs the
#                  defaults; the older "name|settings" form is read too), M (default 1,4,16,64,256),
#        SHAPES (default "mixtral-8x7b qwen3-30b-a3b"), ITERS (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
OUT=${OUT:-build/bench_moe_variants}
mkdir -p "$OUT"
IFS=';' read -ra variants <<<"${VARIANTS:?VARIANTS=\"name=VAR=value;...\"}"
names=()
for v in "${variants[@]}"; do
  if [[ $v == *"|"* ]]; then
    name=${v%%|*} settings=${v#*|}
  elif [[ $v == *=* ]]; then
    name=${v%%=*} settings=${v#*=}
  else
    name=$v settings=
  fi
  names+=("$name")
  : >"$OUT/moe_$name.jsonl"
  for shape in ${SHAPES:-mixtral-8x7b qwen3-30b-a3b}; do
    env $settings "$QLM_BUILD/qlm" bench-moe --shape "$shape" --format gptq --bits 4 --group 128 \
      --m "${M:-1,4,16,64,256}" --device cuda --iters "${ITERS:-20}" --json >>"$OUT/moe_$name.jsonl"
  done
done
python3 - "$OUT" "${names[@]}" <<'PY'
import json, sys
out, names = sys.argv[1], sys.argv[2:]
rows = {}
for n in names:
    for line in open(f"{out}/moe_{n}.jsonl"):
        if line.startswith("{"):
            r = json.loads(line)
            rows.setdefault((r["shape"], r["m"]), {})[n] = r
print("| shape | M | floor µs | " + " | ".join(f"{n} µs (path)" for n in names) + " |")
print("|---|---|---|" + "---|" * len(names))
for (shape, m), v in rows.items():
    floor = next(iter(v.values()))["floor_us"]
    cells = [f"{v[n]['moe_us']:.1f} ({v[n].get('path', '?')})" if n in v else "-" for n in names]
    print(f"| {shape} | {m} | {floor:.1f} | " + " | ".join(cells) + " |")
PY
