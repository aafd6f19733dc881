#!/usr/bin/env python3
"""Round-to-nearest int4 GPTQ (v1, symmetric, group 128) export of the trained default model.

Stand-in for scripts/quantize_default_model.py (llm-compressor GPTQ), whose run did not finish in
the session that trained the model. Same on-disk format as AutoGPTQ/GPTQModel writes (FORMATS.md
§3.2): qweight int32 [K/8, N] packed along K, qzeros int32 [K/g, N/8] storing zero - 1, scales
fp16 [K/g, N], g_idx int32 [K]. Embeddings and norms stay bf16.

Usage: /opt/fixvenv/bin/python3 scripts/rtn_default_model.py models/default.float-normalized models/default
"""
import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

BITS, GROUP, PACK = 4, 128, 8
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def pack_rows(codes):
    """[R, C] codes < 16 -> [R / 8, C] int32, row r in bits 4 * (r % 8) of word r // 8."""
    rows, cols = codes.shape
    words = torch.zeros((rows // PACK, cols), dtype=torch.int64)
    for i in range(PACK):
        words |= codes[i::PACK, :].to(torch.int64) << (BITS * i)
    return words.to(torch.uint32).view(torch.int32) if hasattr(torch, "uint32") else words.to(torch.int32)


def quantize(weight_nk):
    w = weight_nk.float().t().contiguous()  # [K, N]
    k, n = w.shape
    grouped = w.reshape(k // GROUP, GROUP, n)
    scales = (grouped.abs().amax(dim=1).clamp(min=1e-8) * 2 / 15).half()  # [K/g, N]
    codes = torch.clamp(torch.round(grouped / scales.float()[:, None, :]) + 8, 0, 15).to(torch.int64).reshape(k, n)
    qweight = pack_rows(codes)
    qzeros = pack_rows(torch.full((n, k // GROUP), 7, dtype=torch.int64)).t().contiguous()
    g_idx = (torch.arange(k) // GROUP).to(torch.int32)
    return qweight, qzeros, scales, g_idx


def main(src, dst):
    src, dst = Path(src), Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    tensors = load_file(str(src / "model.safetensors"))
    out = {}
    for name, t in tensors.items():
        module, _, leaf = name.rpartition(".")
        if leaf == "weight" and module.rsplit(".", 1)[-1] in LINEARS:
            qweight, qzeros, scales, g_idx = quantize(t)
            out[f"{module}.qweight"], out[f"{module}.qzeros"] = qweight, qzeros
            out[f"{module}.scales"], out[f"{module}.g_idx"] = scales, g_idx
        else:
            out[name] = t.to(torch.bfloat16).contiguous()
    save_file(out, str(dst / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((src / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "gptq", "bits": BITS, "group_size": GROUP, "desc_act": False,
                                     "sym": True, "checkpoint_format": "gptq", "static_groups": False,
                                     "true_sequential": True, "damp_percent": 0.0}
    config.pop("dtype", None)
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(src / f, dst / f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
