#!/usr/bin/env python3
"""Markdown table of an FP8 large-M configuration sweep (scripts/bench_fp8_configs.sh output):
qlm's time per CUTLASS configuration and cuBLASLt ("off"), each including qlm's per-token
activation quantization, beside torch._scaled_mm on pre-quantized activations.
Usage: gen_fp8_sweep_table.py CONFIGS.jsonl TORCH.jsonl"""
import collections
import json
import sys


def main():
    configs_path, torch_path = sys.argv[1], sys.argv[2]
    torch_us = {}
    for line in open(torch_path):
        r = json.loads(line)
        if r.get("kind") == "peer" and r.get("impl") == "torch_scaled_mm_fp8" and "median_us" in r:
            torch_us[(r["k"], r["n"], r["m"])] = r["median_us"]
    table = collections.defaultdict(dict)
    names = []
    for line in open(configs_path):
        if not line.strip():
            continue
        r = json.loads(line)
        # A promotion interval other than CUTLASS's default 4 (sweeps with PROMOTIONS) is part of the name.
        name = r["config"] + (f" p{r['promotion']}" if r.get("promotion", 4) != 4 else "")
        if name not in names:
            names.append(name)
        table[(r["k"], r["n"], r["m"])][name] = r["median_us"]
    print("| K x N | M | torch µs | " + " | ".join(f"{n} µs" for n in names) + " | best | best vs torch |")
    print("|---|---|---|" + "---|" * len(names) + "---|---|")
    for (k, n, m) in sorted(table):
        row = table[(k, n, m)]
        best = min(row, key=row.get)
        t = torch_us.get((k, n, m))
        torch_cell, ratio = (f"{t:.1f}", f"{t / row[best]:.2f}x") if t else ("—", "—")
        cells = " | ".join(f"{row[c]:.1f}" if c in row else "—" for c in names)
        print(f"| {k} x {n} | {m} | {torch_cell} | {cells} | {best} | {ratio} |")


if __name__ == "__main__":
    main()
