#!/usr/bin/env python3
"""Summarises an Nsight Compute raw CSV (`ncu --csv --page raw --metrics gpu__time_duration.sum ...`):
per kernel name, the number of launches and their total / mean duration, largest total first.
--last N keeps only the last N launches (e.g. the final decode step of a run).
Usage: python3 scripts/ncu_summary.py FILE.csv [--last N] [--top K]"""
import argparse
import csv
import io
from collections import OrderedDict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--last", type=int, default=0)
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    text = open(args.csv, errors="replace").read()
    rows = [l for l in text.splitlines() if l.startswith('"')]
    reader = csv.reader(io.StringIO("\n".join(rows)))
    header = next(reader)
    name_i, time_i = header.index("Kernel Name"), header.index("gpu__time_duration.sum")
    launches = []
    for row in reader:
        if len(row) <= time_i or not row[0].isdigit():
            continue  # the units row
        try:
            launches.append((row[name_i], float(row[time_i].replace(",", ""))))
        except ValueError:
            continue
    if args.last:
        launches = launches[-args.last:]
    agg = OrderedDict()
    for name, ns in launches:
        n, total = agg.get(name, (0, 0.0))
        agg[name] = (n + 1, total + ns)
    total_ns = sum(t for _, t in agg.values())
    print(f"{len(launches)} launches, {total_ns / 1e3:.1f} us in total")
    for name, (n, t) in sorted(agg.items(), key=lambda kv: -kv[1][1])[: args.top]:
        print(f"{t / 1e3:10.1f} us {n:5d} x {t / n / 1e3:8.2f} us  {name[:150]}")


if __name__ == "__main__":
    main()
