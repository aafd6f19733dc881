#!/usr/bin/env python3
"""Markdown table of a W4A16 sweep (scripts/sweep_w4a16.sh's sweep.jsonl): µs per variant for each
(shape, M), the path each took (the baseline's where it is not wgmma, the others' where it differs from it), the best variant and its gain over the first
variant (the baseline, normally "rule").
Usage: gen_w4a16_sweep_table.py SWEEP.jsonl [SWEEP2.jsonl ...] [--variants a,b,c] [--ms 64,128]"""
import argparse
import collections
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--variants", help="comma-separated variants, in column order (default: as found)")
    ap.add_argument("--ms", help="comma-separated token counts to keep (default: all)")
    args = ap.parse_args()
    keep_ms = {int(m) for m in args.ms.split(",")} if args.ms else None
    table = collections.defaultdict(dict)
    names, shapes = [], []
    for path in args.files:
        for line in open(path):
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if keep_ms is not None and r["m"] not in keep_ms:
                continue
            v = r["variant"]
            if v not in names:
                names.append(v)
            if (r["k"], r["n"]) not in shapes:
                shapes.append((r["k"], r["n"]))
            table[(r["k"], r["n"], r["m"])][v] = (r["median_us"], r.get("path", ""))
    if args.variants:
        names = args.variants.split(",")
    base = names[0]
    print("| K x N | M | " + " | ".join(f"{n} µs" for n in names) + f" | best | best vs {base} |")
    print("|---|---|" + "---|" * len(names) + "---|---|")
    for k, n in shapes:
        for m in sorted(mm for (kk, nn, mm) in table if (kk, nn) == (k, n)):
            row = table[(k, n, m)]
            cells = []
            for v in names:
                if v not in row:
                    cells.append("")
                    continue
                us, path = row[v]
                shown = path != "wgmma" if v == base or base not in row else path != row[base][1]
                cells.append(f"{us:.1f}" + (f" ({path})" if shown else ""))
            present = [v for v in names if v in row]
            best = min(present, key=lambda v: row[v][0])
            gain = row[base][0] / row[best][0] if base in row else float("nan")
            print(f"| {k} x {n} | {m} | " + " | ".join(cells) + f" | {best} | {gain:.2f}x |")


if __name__ == "__main__":
    main()
