#!/usr/bin/env python3
"""Summarises Nsight Compute's SASS source page (`ncu -i REP --page source --csv --print-source sass`):
the warp-state samples in total and per stall column, the instructions with the most samples (with the
stall columns that hold them) and the samples per opcode.
Usage: python3 scripts/ncu_source_summary.py FILE.csv [--top N]"""
import argparse
import csv
import io
import re
from collections import Counter


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    lines = open(args.csv, errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(lines) if '"Source"' in l or l.startswith("# Address") or '"Address"' in l), None)
    if start is None:
        print("no source table in", args.csv)
        print("\n".join(lines[:20]))
        return
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    src = next(i for i, h in enumerate(header) if h == "Source")
    total_col = next((i for i, h in enumerate(header) if h.startswith("Warp Stall Sampling (All")), None)
    stall_cols = [i for i, h in enumerate(header) if re.search(r"stall|Stall", h) and i != total_col]
    numeric = {i for i in stall_cols if all(number(r[i]) is not None for r in body if r[i] != "")}
    stall_cols = [i for i in stall_cols if i in numeric]
    if total_col is None:
        print("columns:", header)
        return
    total = sum(number(r[total_col]) or 0 for r in body)
    print(f"{len(body)} instructions, {total:.0f} samples (all)")
    per_col = {header[i]: sum(number(r[i]) or 0 for r in body) for i in stall_cols}
    for name, v in sorted(per_col.items(), key=lambda kv: -kv[1])[:16]:
        if v > 0:
            print(f"  {name}: {v:.0f} ({100 * v / max(total, 1):.1f} %)")
    print(f"\ntop {args.top} instructions by samples (index: samples, % | SASS | largest stall columns):")
    ranked = sorted(range(len(body)), key=lambda j: -(number(body[j][total_col]) or 0))
    for j in ranked[: args.top]:
        r = body[j]
        v = number(r[total_col]) or 0
        if v <= 0:
            break
        parts = sorted(((number(r[i]) or 0, header[i]) for i in stall_cols), reverse=True)[:3]
        detail = ", ".join(f"{n} {c:.0f}" for c, n in parts if c > 0)
        print(f"  {j:5d}: {v:7.0f} {100 * v / max(total, 1):5.1f} % | {r[src].strip()[:70]:70s} | {detail}")
    by_op = Counter()
    for r in body:
        op = r[src].strip().split()
        op = [t for t in op if not t.startswith("@")]
        by_op[op[0].split(".")[0] if op else "?"] += number(r[total_col]) or 0
    print("\nsamples per opcode:")
    for op, v in by_op.most_common(20):
        print(f"  {op:12s} {v:8.0f} {100 * v / max(total, 1):5.1f} %")


if __name__ == "__main__":
    main()
