#!/usr/bin/env python3
"""Per-step summary of a decode trace (CSV of bench/probes/cupti_trace.cc, scripts/probe_decode_trace.sh; the columns
of `nsys stats --report cuda_gpu_trace --format csv` too).

Rows are ordered by start time and cut into steps at each embedding kernel (the first node of a decode step's graph);
the last --steps whole steps are summarised: per kernel kind (the name without template arguments and parameters,
plus the launch grid, which tells the layers of one kernel apart), launches per step, mean device time, device time
per step and its share of the step's span (first start to last end). The span against the sum of device times shows
the gaps between nodes (or, where programmatic dependent launch overlaps them, a sum above the span). Under
programmatic dependent launch a kernel starts while its predecessor runs and waits inside, so its device time
overstates its cost; the critical-path column charges each row only for how far it moves the step's frontier (the
latest end so far) — the columns of a chain of nodes add up to the span.
"""
import argparse
import csv
import re
import sys
from collections import defaultdict


def column(header, prefix):
    for i, h in enumerate(header):
        if h.strip().lower().startswith(prefix.lower()):
            return i
    return None


def kind_of(name):
    n = name.strip()
    if n.startswith("["):  # memcpy / memset rows
        return n
    n = re.sub(r"^void\s+", "", n).replace("(anonymous namespace)::", "")
    depth, out = 0, []
    for ch in n:  # drop template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    n = "".join(out)
    n = n.split("(")[0]
    return n.split("::")[-1] or name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--title", default="")
    ap.add_argument("--step-marker", default="embedding_kernel")
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        rows = list(csv.reader(f))
    # nsys may print notices before the header
    hdr_at = next((i for i, r in enumerate(rows) if r and r[0].strip().lower().startswith("start")), None)
    if hdr_at is None:
        sys.exit(f"{a.csv}: no header with a Start column")
    header, body = rows[hdr_at], rows[hdr_at + 1:]
    c_start, c_dur, c_name = column(header, "Start"), column(header, "Duration"), column(header, "Name")
    c_gx, c_gy, c_gz = column(header, "GrdX"), column(header, "GrdY"), column(header, "GrdZ")
    recs = []
    for r in body:
        if len(r) <= max(c_start, c_dur, c_name):
            continue
        try:
            s, d = float(r[c_start]), float(r[c_dur])
        except ValueError:
            continue
        grid = ""
        if c_gx is not None and r[c_gx].strip():
            grid = "x".join(r[c].strip() for c in (c_gx, c_gy, c_gz) if c is not None)
        recs.append((s, d, r[c_name], grid))
    recs.sort()
    api = [r for r in recs if r[2].startswith("[API ")]  # host calls: their own table, not part of the GPU's steps
    recs = [r for r in recs if not r[2].startswith("[API ")]
    marks = [i for i, r in enumerate(recs) if a.step_marker in r[2]]
    if len(marks) < 2:
        sys.exit(f"{a.csv}: fewer than two '{a.step_marker}' rows; cannot cut steps")
    bounds = list(zip(marks, marks[1:] + [len(recs)]))[-a.steps:]
    per_kind = defaultdict(lambda: [0, 0.0, 0.0])  # launches, ns, critical-path ns (over all summarised steps)
    spans, sums, nodes, starts = [], [], [], []
    for b, e in bounds:
        seg = recs[b:e]
        span = max(s + d for s, d, _, _ in seg) - seg[0][0]
        spans.append(span)
        sums.append(sum(d for _, d, _, _ in seg))
        nodes.append(len(seg))
        starts.append(seg[0][0])
        frontier = seg[0][0]
        for s, d, name, grid in seg:
            k = (kind_of(name), grid)
            per_kind[k][0] += 1
            per_kind[k][1] += d
            per_kind[k][2] += max(0.0, s + d - frontier)
            frontier = max(frontier, s + d)
    n = len(bounds)
    span_us = sum(spans) / n / 1e3
    period = [(b - a_) / 1e3 for a_, b in zip(starts, starts[1:])]
    print(f"## {a.title or a.csv}: last {n} steps")
    print(f"rows per step {min(nodes)}-{max(nodes)}; step span (first start to last end) {span_us:.1f} µs; "
          f"sum of device times {sum(sums) / n / 1e3:.1f} µs; step period (start to start) "
          f"{(sum(period) / len(period)) if period else float('nan'):.1f} µs")
    print()
    print("| kernel | grid | per step | mean µs | critical path µs per step | % of span | mean critical µs |")
    print("|---|---|---|---|---|---|---|")
    for (kind, grid), (cnt, ns, crit) in sorted(per_kind.items(), key=lambda kv: -kv[1][2]):
        print(f"| {kind} | {grid} | {cnt / n:.1f} | {ns / cnt / 1e3:.2f} | {crit / n / 1e3:.1f} | "
              f"{100.0 * crit / n / 1e3 / span_us:.1f} | {crit / cnt / 1e3:.2f} |")
    if api:
        # Host calls from the first summarised step's start to the end of the trace, per step.
        t0 = recs[bounds[0][0]][0]
        calls = defaultdict(lambda: [0, 0.0])
        for s, d, name, _ in api:
            if s >= t0:
                calls[name][0] += 1
                calls[name][1] += d
        print()
        print("| host call | per step | mean µs | µs per step |")
        print("|---|---|---|---|")
        for name, (cnt, ns) in sorted(calls.items(), key=lambda kv: -kv[1][1]):
            print(f"| {name} | {cnt / n:.1f} | {ns / cnt / 1e3:.2f} | {ns / n / 1e3:.1f} |")


if __name__ == "__main__":
    main()
