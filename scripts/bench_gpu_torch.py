#!/usr/bin/env python3
"""The peers of the GPU side-by-side benchmark (scripts/bench_gpu.sh), measured in the same run as
qlm: cuBLAS bf16 through torch.matmul, torch's int4 kernel (torch._weight_int4pack_mm, group 128)
torch._scaled_mm fp8 (per-token x per-channel scales; once on pre-quantized activations and
once including a torch activation quantization) and torch._int_mm INT8 (pre-quantized per-token activations, the
int32 product scaled per token x per channel to bf16 in torch, as a torch user writes it; only M > 16, which
torch._int_mm requires on CUDA), plus the device-to-device copy bandwidth that gives the floors. Same method as `qlm bench-linear --device cuda` (default --timing graph): weights rotated
through copies totalling >= 512 MiB (far beyond the 60 MB L2), every copy called once inside one
CUDA graph, the graph replayed between two CUDA events, median of 10 replays' mean per call.
Writes one JSON object per line to --out."""
import argparse
import json
import math

import torch

SHAPES = {
    "llama3-8b": {"qkv": (4096, 6144), "o": (4096, 4096), "gate_up": (4096, 28672), "down": (14336, 4096)},
    "llama3-70b": {"qkv": (8192, 10240), "o": (8192, 8192), "gate_up": (8192, 57344), "down": (28672, 8192)},
}
MS = [1, 16, 64, 256, 1024]
ROTATE_BYTES = 512 << 20


def copies_for(nbytes):
    return max(1, min(64, math.ceil(ROTATE_BYTES / max(nbytes, 1))))


def time_batches(calls, batches=10):
    """calls: list of zero-argument callables (one per weight copy), captured into one CUDA graph
    (falling back to eager launches when capture fails); the graph is replayed `batches` times between
    events. Median per-call microseconds: device time, without Python's launch overhead."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for c in calls:
            c()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for c in calls:
                c()
        run = graph.replay
    except RuntimeError:
        def run():
            for c in calls:
                c()
    run()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(batches):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        per_call.append(start.elapsed_time(stop) * 1e3 / len(calls))
    per_call.sort()
    return per_call[len(per_call) // 2]


def copy_bandwidth():
    """Eager device-to-device copies of 2 GiB (launch overhead is negligible; inside a CUDA graph a
    copy becomes a memcpy node that runs slower). Bytes read + written per second, best of 10."""
    n = 2 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    best = None
    for _ in range(11):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        b.copy_(a)
        stop.record()
        stop.synchronize()
        ms = start.elapsed_time(stop)
        best = ms if best is None else min(best, ms)
    return 2 * n / (best * 1e-3) / 1e9


def bench_bf16(k, n, ms):
    w_bytes = k * n * 2
    ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(copies_for(w_bytes))]
    out = {}
    for m in ms:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        out[m] = time_batches([lambda w=w: torch.matmul(x, w.t()) for w in ws])
    return w_bytes, out


def bench_int4(k, n, ms, group=128):
    w_bytes = k * n // 2 + (k // group) * n * 2 * 2
    packed = []
    for _ in range(copies_for(w_bytes)):
        codes = torch.randint(0, 16, (n, k), dtype=torch.int32, device="cuda")
        w_uint8 = (codes[:, ::2] << 4 | codes[:, 1::2]).to(torch.uint8)
        packed.append(torch._convert_weight_to_int4pack(w_uint8, 8))
    sz = torch.rand(k // group, n, 2, device="cuda", dtype=torch.bfloat16)
    out = {}
    for m in ms:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        out[m] = time_batches([lambda p=p: torch._weight_int4pack_mm(x, p, group, sz) for p in packed])
    return w_bytes, out


def quantize_fp8_rows(x):
    amax = x.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12)
    scale = amax / 448.0
    return (x.float() / scale).clamp(-448, 448).to(torch.float8_e4m3fn), scale


def bench_fp8(k, n, ms, with_quant):
    w_bytes = k * n + n * 4
    ws = [torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn) for _ in range(copies_for(w_bytes))]
    sw = torch.rand(1, n, device="cuda", dtype=torch.float32) + 0.5
    out = {}
    for m in ms:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        xq, sx = quantize_fp8_rows(x)

        def call(w):
            if with_quant:
                q, s = quantize_fp8_rows(x)
                return torch._scaled_mm(q, w.t(), scale_a=s, scale_b=sw, out_dtype=torch.bfloat16)
            return torch._scaled_mm(xq, w.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)

        out[m] = time_batches([lambda w=w: call(w) for w in ws])
    return w_bytes, out


def bench_int8(k, n, ms):
    w_bytes = k * n + n * 4
    ws = [torch.randint(-128, 128, (n, k), device="cuda", dtype=torch.int8) for _ in range(copies_for(w_bytes))]
    sw = torch.rand(1, n, device="cuda", dtype=torch.float32) * 1e-3
    out = {}
    for m in ms:
        if m <= 16:  # torch._int_mm refuses M <= 16 on CUDA
            continue
        xq = torch.randint(-128, 128, (m, k), device="cuda", dtype=torch.int8)
        sx = torch.rand(m, 1, device="cuda", dtype=torch.float32) * 1e-2

        def call(w):
            return (torch._int_mm(xq, w.t()).float() * sx * sw).to(torch.bfloat16)

        out[m] = time_batches([lambda w=w: call(w) for w in ws])
    return w_bytes, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--ms", default=",".join(map(str, MS)), help="token counts, comma-separated")
    ap.add_argument("--peers", default="", help="comma-separated subset of the peers (default: all)")
    args = ap.parse_args()
    ms = [int(m) for m in args.ms.split(",")]
    torch.manual_seed(0)
    with open(args.out, "w") as f:
        def emit(rec):
            f.write(json.dumps(rec) + "\n")
            f.flush()

        props = torch.cuda.get_device_properties(0)
        emit({"kind": "device", "gpu": props.name, "sms": props.multi_processor_count,
              "torch": torch.__version__, "copy_gbps": copy_bandwidth()})
        peers = [("torch_bf16", bench_bf16), ("torch_int4", bench_int4),
                 ("torch_scaled_mm_fp8", lambda k, n, ms: bench_fp8(k, n, ms, False)),
                 ("torch_scaled_mm_fp8_with_quant", lambda k, n, ms: bench_fp8(k, n, ms, True)),
                 ("torch_int_mm_int8", bench_int8)]
        if args.peers:
            peers = [p for p in peers if p[0] in args.peers.split(",")]
        for model, layers in SHAPES.items():
            for layer, (k, n) in layers.items():
                for impl, fn in peers:
                    try:
                        w_bytes, times = fn(k, n, ms)
                        for m, us in times.items():
                            emit({"kind": "peer", "impl": impl, "model": model, "layer": layer, "k": k, "n": n,
                                  "m": m, "median_us": us, "weight_bytes": w_bytes})
                    except Exception as e:  # a peer that cannot run a shape is reported, not fatal
                        emit({"kind": "peer", "impl": impl, "model": model, "layer": layer, "k": k, "n": n,
                              "error": f"{type(e).__name__}: {e}"[:300]})
                    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
