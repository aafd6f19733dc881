#!/usr/bin/env python3
"""Probe (investigation, not part of the benchmark): does torch._scaled_mm's time depend on the
weight values it multiplies, and which kernel does it run? Times torch._scaled_mm (pre-quantized
per-token activations, per-channel weight scales) with the method of bench_gpu_torch.py for three
weight value distributions: 'randn' (what bench_gpu_torch.py used: N(0,1) cast to e4m3, small
exponents only), 'qlm' (what `qlm bench-linear --format fp8` uses: uniform(-400, 400) cast to e4m3)
and 'checkpoint' (N(0,1) scaled per output channel to amax 448, as a real FP8 checkpoint stores).
Prints one JSON line per (shape, M, distribution) and the kernel names torch.profiler saw."""
import argparse
import json

import torch

from bench_gpu_torch import SHAPES, copies_for, time_batches


def weights(n, k, dist):
    w = torch.randn(n, k, device="cuda")
    if dist == "qlm":
        w = (torch.rand(n, k, device="cuda") * 2 - 1) * 400
    elif dist == "checkpoint":
        w = w * (448.0 / w.abs().amax(dim=1, keepdim=True))
    return w.to(torch.float8_e4m3fn)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ms", default="256,1024")
    ap.add_argument("--dists", default="randn,qlm,checkpoint")
    args = ap.parse_args()
    torch.manual_seed(0)
    names = {}
    for model, layers in SHAPES.items():
        for layer, (k, n) in layers.items():
            for dist in args.dists.split(","):
                ws = [weights(n, k, dist) for _ in range(copies_for(k * n))]
                sw = torch.rand(1, n, device="cuda", dtype=torch.float32) + 0.5
                for m in map(int, args.ms.split(",")):
                    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                    amax = x.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12)
                    sx = amax / 448.0
                    xq = (x.float() / sx).clamp(-448, 448).to(torch.float8_e4m3fn)
                    call = lambda w: torch._scaled_mm(xq, w.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)
                    us = time_batches([lambda w=w: call(w) for w in ws])
                    print(json.dumps({"model": model, "layer": layer, "k": k, "n": n, "m": m, "dist": dist,
                                      "us": round(us, 2)}), flush=True)
                    if dist == "randn":
                        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
                            call(ws[0])
                            torch.cuda.synchronize()
                        for e in p.events():
                            if e.device_type == torch.autograd.DeviceType.CUDA:
                                names.setdefault(e.name[:400], []).append(f"{k}x{n} m{m}")
                del ws
    for name, where in names.items():
        print("KERNEL", where, name)


if __name__ == "__main__":
    main()
