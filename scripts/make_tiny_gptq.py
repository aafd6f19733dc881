#!/usr/bin/env python3
"""Writes models/tiny-gptq: a 2-layer LlamaForCausalLM quantized GPTQ-style (4-bit, group 32,
symmetric, desc_act false, checkpoint_format "gptq" = v1 zero convention).

Only numpy is used; the safetensors file is written by hand so the script documents the format.
Output is deterministic (seeded), so re-running it reproduces the committed bytes.

Layout per linear layer (K = in_features, N = out_features, g = group size, 8 codes per int32):
  qweight I32 [K/8, N]   code of (k, n) in bits 4*(k % 8) of word [k // 8, n], low bits first
  qzeros  I32 [K/g, N/8] stored zero 7 (= 8 - 1, the v1 convention) for every (group, n)
  scales  F16 [K/g, N]
  g_idx   I32 [K]        k // g
real weight = (code - 8) * scale.
"""
import json
import struct
import sys
from pathlib import Path

import numpy as np

HIDDEN = 64
INTERMEDIATE = 128
LAYERS = 2
HEADS = 4
KV_HEADS = 2
VOCAB = 256
BITS = 4
GROUP = 32
PACK = 32 // BITS
SEED = 1234

QUANTIZATION_CONFIG = {
    "bits": BITS,
    "checkpoint_format": "gptq",
    "damp_percent": 0.01,
    "desc_act": False,
    "group_size": GROUP,
    "lm_head": False,
    "meta": {"quantizer": ["qlm-make-tiny-gptq:0.1"]},
    "pack_dtype": "int32",
    "quant_method": "gptq",
    "static_groups": False,
    "sym": True,
    "true_sequential": True,
}

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": HIDDEN,
    "initializer_range": 0.02,
    "intermediate_size": INTERMEDIATE,
    "max_position_embeddings": 2048,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": HEADS,
    "num_hidden_layers": LAYERS,
    "num_key_value_heads": KV_HEADS,
    "pretraining_tp": 1,
    "quantization_config": QUANTIZATION_CONFIG,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "transformers_version": "4.46.3",
    "use_cache": True,
    "vocab_size": VOCAB,
}


def pack_along_rows(codes):
    """[R, C] codes < 16 -> [R / 8, C] uint32, row r in bits 4 * (r % 8) of word r // 8."""
    rows, cols = codes.shape
    words = np.zeros((rows // PACK, cols), dtype=np.uint32)
    for i in range(PACK):
        words |= codes[i::PACK, :].astype(np.uint32) << np.uint32(BITS * i)
    return words


def gptq_quantize(weight):
    """weight [K, N] float -> (qweight, qzeros, scales, g_idx), symmetric 4-bit GPTQ v1."""
    k, n = weight.shape
    maxq = (1 << BITS) - 1
    zero = (maxq + 1) // 2  # 8
    grouped = weight.reshape(k // GROUP, GROUP, n)
    absmax = np.maximum(np.abs(grouped).max(axis=1), 1e-8)  # [K/g, N]
    scales = (absmax * 2 / maxq).astype(np.float16)
    s = scales.astype(np.float32)[:, None, :]
    codes = np.clip(np.rint(grouped / s) + zero, 0, maxq).astype(np.uint32).reshape(k, n)
    qweight = pack_along_rows(codes).view(np.int32)
    stored_zeros = np.full((n, k // GROUP), zero - 1, dtype=np.uint32)  # v1 stores zero - 1
    qzeros = pack_along_rows(stored_zeros).T.copy().view(np.int32)  # packed along N
    g_idx = (np.arange(k) // GROUP).astype(np.int32)
    return qweight, qzeros, scales, g_idx


def build_tensors(rng):
    tensors = {}
    tensors["model.embed_tokens.weight"] = (rng.standard_normal((VOCAB, HIDDEN)) * 0.02).astype(np.float16)
    tensors["lm_head.weight"] = (rng.standard_normal((VOCAB, HIDDEN)) * 0.02).astype(np.float16)
    tensors["model.norm.weight"] = (1 + rng.standard_normal(HIDDEN) * 0.01).astype(np.float16)
    head_dim = HIDDEN // HEADS
    linears = {
        "self_attn.q_proj": (HIDDEN, HEADS * head_dim),
        "self_attn.k_proj": (HIDDEN, KV_HEADS * head_dim),
        "self_attn.v_proj": (HIDDEN, KV_HEADS * head_dim),
        "self_attn.o_proj": (HEADS * head_dim, HIDDEN),
        "mlp.gate_proj": (HIDDEN, INTERMEDIATE),
        "mlp.up_proj": (HIDDEN, INTERMEDIATE),
        "mlp.down_proj": (INTERMEDIATE, HIDDEN),
    }
    for layer in range(LAYERS):
        prefix = f"model.layers.{layer}"
        for norm in ("input_layernorm", "post_attention_layernorm"):
            tensors[f"{prefix}.{norm}.weight"] = (1 + rng.standard_normal(HIDDEN) * 0.01).astype(np.float16)
        for name, (k, n) in linears.items():
            weight = rng.standard_normal((k, n)).astype(np.float32) * (1 / np.sqrt(k))
            qweight, qzeros, scales, g_idx = gptq_quantize(weight)
            tensors[f"{prefix}.{name}.qweight"] = qweight
            tensors[f"{prefix}.{name}.qzeros"] = qzeros
            tensors[f"{prefix}.{name}.scales"] = scales
            tensors[f"{prefix}.{name}.g_idx"] = g_idx
    return tensors


DTYPES = {np.dtype(np.float16): "F16", np.dtype(np.int32): "I32", np.dtype(np.float32): "F32"}


def safetensors_bytes(tensors, metadata):
    """8-byte little-endian header length, JSON header padded with spaces to a multiple of 8, then
    the tensors back to back in name order (every size here is a multiple of 8, so all stay aligned)."""
    header = {"__metadata__": metadata}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": DTYPES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)
    return struct.pack("<Q", len(header_bytes)) + header_bytes + b"".join(blobs)


def main():
    out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "models" / "tiny-gptq"
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    tensors = build_tensors(rng)
    (out_dir / "config.json").write_text(json.dumps(CONFIG, indent=2, sort_keys=True) + "\n")
    (out_dir / "model.safetensors").write_bytes(safetensors_bytes(tensors, {"format": "pt"}))
    size = (out_dir / "model.safetensors").stat().st_size
    print(f"wrote {out_dir}: {len(tensors)} tensors, {size} bytes")


if __name__ == "__main__":
    main()
