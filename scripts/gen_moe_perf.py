#!/usr/bin/env python3
"""Fused-MoE layer table of docs/performance.md from the `qlm bench-moe --json` files written by
scripts/bench_moe.sh (docs/perf-data/moe_cpu.jsonl and moe_cuda.jsonl; a missing file is skipped).

Usage: python3 scripts/gen_moe_perf.py [docs/performance.md] [--cpu FILE] [--cuda FILE]
Replaces only the text between <!-- moe:begin --> and <!-- moe:end --> (appended at the end when
the markers are absent). Standard library only."""
import json
import os
import sys

from perf_doc import replace_region

BEGIN, END = "<!-- moe:begin -->", "<!-- moe:end -->"
GROUPED_ROWS_PER_EXPERT = 32  # kGroupedRowsPerExpert of src/kernels/cuda/moe_cuda.cc (rows written before "path")


def path(r):
    """The experts' path as the MoE kernel chooses it."""
    if r["device"] != "cuda":
        return f"per expert ({r['expert_kernel']})"
    if r["format"] == "bf16":
        return f"per expert ({r['expert_kernel']})"
    if "path" in r:  # bench-moe writes the kernel's own words since session 41
        return r["path"]
    grouped = r["m"] * r["top_k"] <= GROUPED_ROWS_PER_EXPERT * r["experts"]
    return "grouped WNA16" if grouped else "per expert, own WNA16 layout"


def cuda_bandwidth_source(bw):
    # bench-moe used the H200's nominal 4800 GB/s on CUDA before session 41, the measured copy bandwidth since.
    return "nominal HBM3e of an H200" if bw == {4800} else "measured: device copy bandwidth, read + written"


def timing(r):
    # Runs before --timing existed timed CUDA calls eagerly with events, CPU calls by the wall clock.
    return r.get("timing", "events" if r.get("device") == "cuda" else "wall")


def read(path):
    meta, end, rows = {}, {}, []
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if "meta" in r:
                meta = r["meta"]
            elif "meta_end" in r:
                end = r["meta_end"]
            else:
                rows.append(r)
    return meta, end, rows


def table(meta, end, rows, source):
    out = [f"### {meta.get('device', '?').upper()}: {meta.get('machine', '?')}", "",
           f"`{source}`, {meta.get('date', '?')}; load average (1/5/15 min) before {meta.get('load_before', '?')}, "
           f"after {end.get('load_after', '?')}" + (
               "; on a shared machine a load above the core count means other jobs took cores during the run, "
               "which inflates the CPU times" if meta.get("device") == "cpu" else "") + ".", ""] + (
               [f"Note on this run: {meta['note']}", ""] if meta.get("note") else []) + [
           "| shape | experts | M | act | kernel: path | timing | MoE µs | dense-equivalent µs | "
           "experts touched | floor µs | floor / MoE |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fmt = "bf16" if r["format"] == "bf16" else f"gptq int{r['bits']} g{r['group']}"
        out.append(f"| {r['shape']} (E {r['experts']}, top-{r['top_k']}) | {fmt} | {r['m']} | {r['act_dtype']} | "
                   f"{r['kernel']}: {path(r)} | {timing(r)} | {r['moe_us']:.0f} | {r['dense_us']:.0f} | "
                   f"{r['experts_touched']:.1f} | {r['floor_us']:.0f} | {100 * r['floor_us'] / r['moe_us']:.0f} % |")
    bw = {round(r["bandwidth_gbps"]) for r in rows}
    out += ["", f"Bandwidth for the floor: {', '.join(str(b) for b in sorted(bw))} GB/s "
            f"({cuda_bandwidth_source(bw) if meta.get('device') == 'cuda' else 'measured: parallel read of 1 GiB'}).", ""]
    return out


READING = [
    "Reading the CUDA table (how `cuda_grouped` spends the time; docs/formats.md has the paths):", "",
    "- **Grouped WNA16** (GPTQ / AWQ / compressed-tensors: decode and small batches) is one launch per "
    "projection for all experts, each block reading its row tile's expert, written by the grouping on the device; "
    "every kernel of the layer starts under programmatic dependent launch. *path* says which "
    "kernel: `tensor cores` (since session 41: `mma.sync` with the weights of the `cuda_wna16` layout as the A "
    "operand, row tiles of 8 / 16 / 32, for 4-bit experts with groups of multiples of 32 rows and BF16 / F16 "
    "activations, up to 64 routed rows per expert) or `CUDA-core GEMV` (every other WNA16 expert, up to 32; one "
    "FMA per weight and row, compute-bound from a few rows per expert). docs/moe-kernel-notes.md has both "
    "measured side by side. *timing* `events` is the eager call between two events, router, grouping, gather, "
    "GEMMs and combine launched from the host one after another, so at one token the launches, not the weight "
    "stream, can dominate; `graph` replays each call from a CUDA graph (`qlm bench-moe --timing graph`, the "
    "default since session 38, where the layer does not wait for the host), as a decode step runs it. At one "
    "token Qwen3's 128 small experts leave the layer latency-bound (a chain of six kernels of a few µs each "
    "for 19 MB of weights); docs/moe-kernel-notes.md has the per-kernel times.",
    "- **Per expert** (bf16, FP8, INT8, and WNA16 above the grouped threshold) copies the expert offsets to "
    "the host once per layer and runs every active expert over its rows: bf16 / FP8 / INT8 experts on their "
    "own linear kernels — close to the floor for Mixtral's 8 large experts in bf16, launch-bound for Qwen3's "
    "128 small ones (tens of µs per active expert); a grouped GEMM for these formats (cuBLAS grouped batched "
    "GEMM or a grouped tensor-core kernel) is not written yet. WNA16 experts run from the MoE kernel's own "
    "layout, the only copy of their weights on the GPU (their projections build no kernel of their own): "
    "the split-K GEMV up to 8 rows, above it the expert's weight dequantized for cuBLAS at every call "
    "(Mixtral M = 256: about 18 % slower than the experts' tensor-core `cuda_wna16_fast` kernels it used "
    "when every expert was held twice).",
    "- The dense equivalent touches only k experts, so it is the cost of the same FLOPs without the routing "
    "spread; the gap to the MoE column is the price of touching more experts plus the grouping overhead.", ""]


def render(cpu, cuda, cpu_path, cuda_path):
    lines = ["## Mixture-of-experts layer (`qlm bench-moe`)", "",
             "Generated by `scripts/gen_moe_perf.py` from `scripts/bench_moe.sh` (one fused-MoE layer on random "
             "weights: router, grouping by expert, gate|up, SiLU·mul, down, weighted combine; fresh random router "
             "logits every call). *MoE µs*: median of the routed layer. *Dense equivalent*: the same layer with every "
             "token routed to the same top-k experts — the same FLOPs and kernels over the weights of only k experts "
             "(a dense MLP of width k·I). *Floor*: bytes of the experts the routed calls touch (on average, "
             "*experts touched*) / memory bandwidth; *floor / MoE* is the fraction of that bound reached.", ""]
    if cpu:
        lines += table(*cpu, cpu_path)
    if cuda:
        lines += table(*cuda, cuda_path)
        lines += READING
    if not cpu and not cuda:
        lines += ["(no benchmark data)", ""]
    return "\n".join(lines)


def main():
    argv = sys.argv[1:]
    cpu_path, cuda_path = "docs/perf-data/moe_cpu.jsonl", "docs/perf-data/moe_cuda.jsonl"
    doc = "docs/performance.md"
    i = 0
    while i < len(argv):
        if argv[i] == "--cpu":
            cpu_path, i = argv[i + 1], i + 2
        elif argv[i] == "--cuda":
            cuda_path, i = argv[i + 1], i + 2
        else:
            doc, i = argv[i], i + 1
    region = render(read(cpu_path), read(cuda_path), cpu_path, cuda_path)
    replace_region(doc, BEGIN, END, region)


if __name__ == "__main__":
    main()
