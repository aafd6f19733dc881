#!/usr/bin/env python3
"""Builds the tiny mixture-of-experts model fixtures under tests/data/models/ with transformers, in the
layout of scripts/make_model_fixtures.py (whose helpers it imports; see tests/data/models/README.md).

Run with the fixture venv (torch CPU + transformers; llm-compressor for `ct` and `fp4`):
    /opt/fixvenv/bin/python3 scripts/make_moe_fixtures.py [OUT_DIR] [ct | fp4 [NAME [NVFP4A16|MXFP4A16]]]

For every architecture below it writes two directories:
  <name>/       the transformers model saved in float32
  <name>-gptq/  the same weights with every expert, shared-expert, dense-MLP and attention projection
                quantized to int4 GPTQ (sym, group 32, desc_act false, v1 zeros) by the packer of
                make_model_fixtures.py; the routers (mlp.gate / block_sparse_moe.gate) and Qwen2-MoE's
                shared_expert_gate stay unquantized (as GPTQ tools and vLLM leave them), in float16
with reference.safetensors (transformers logits; for -gptq on the dequantized weights in float32),
expected.json (tokens, 32 greedy ids) and the tokenizer.

  mixtral-moe     MixtralForCausalLM, 4 experts, top-2 (always renormalised), w1/w3/w2 names
  qwen2-moe       Qwen2MoeForCausalLM, 4 experts, top-2, norm_topk_prob false, a shared expert with its
                  sigmoid gate, mlp_only_layers [1] (layer 1 is a dense MLP of intermediate_size)
  qwen3-moe       Qwen3MoeForCausalLM, 8 experts, top-2, norm_topk_prob true, q/k norm,
                  decoder_sparse_step 2 (layer 0 dense, layer 1 experts)

With `ct`, the float fixtures already written are quantized by llm-compressor's GPTQModifier (the GPTQ
algorithm with calibration) into compressed-tensors pack-quantized W4A16, asymmetric, group 32, routers
ignored, saved as the tool writes it  ->  <name>-ct-w4a16/; the reference is transformers on the
checkpoint reloaded and decompressed by compressed-tensors, in float32.

With `fp4 NAME SCHEME` (default qwen3-moe NVFP4A16), one float MoE fixture is quantized by llm-compressor's
QuantizationModifier with that preset (float4 weights, round to nearest, routers ignored)  ->
NAME-ct-nvfp4a16/ or NAME-ct-mxfp4a16/ (refused when the router gap falls below ROUTER_GAP); the reference is transformers on
compressed-tensors' own dequantization of the saved tensors in float32 (make_tool_model_fixtures.py's).

Besides the top-1/top-2 logit gap of make_model_fixtures.py, a seed is skipped when any token's k-th
and (k+1)-th router probabilities are closer than ROUTER_GAP anywhere in the references: the expert
choice must not hinge on float rounding.
"""
import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_model_fixtures as mf  # noqa: E402

ROUTER_GAP = 1e-3

COMMON = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=256, hidden_act="silu", tie_word_embeddings=True)

FIXTURES = [
    # name, config class, tokenizer, overrides, top_k
    ("mixtral-moe", MixtralConfig, "mistral",
     dict(intermediate_size=64, num_local_experts=4, num_experts_per_tok=2, rope_theta=10000.0, sliding_window=None,
          rms_norm_eps=1e-5), 2),
    ("qwen2-moe", Qwen2MoeConfig, "qwen2",
     dict(intermediate_size=128, moe_intermediate_size=64, shared_expert_intermediate_size=64, num_experts=4,
          num_experts_per_tok=2, norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[1],
          rope_theta=1000000.0, rms_norm_eps=1e-6), 2),
    ("qwen3-moe", Qwen3MoeConfig, "qwen2",
     dict(intermediate_size=64, moe_intermediate_size=64, num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
          decoder_sparse_step=2, mlp_only_layers=[], head_dim=16, rope_theta=1000000.0, rms_norm_eps=1e-6), 2),
]


def is_router(name):
    return name.endswith("mlp.gate.weight") or name.endswith("block_sparse_moe.gate.weight") or \
        name.endswith("shared_expert_gate.weight")


def quantize_checkpoint(model):
    """GPTQ tensors and the dequantized float32 state dict: every 2-D projection but embeddings, lm_head
    and routers is int4; the rest float16."""
    tensors, deq_state = {}, {}
    tied = model.config.tie_word_embeddings
    for name, value in model.state_dict().items():
        if tied and name == "lm_head.weight":
            continue
        linear = name.endswith(".weight") and value.dim() == 2 and "embed_tokens" not in name and \
            not name.startswith("lm_head") and not is_router(name)
        if linear:
            module = name[: -len(".weight")]
            qweight, qzeros, scales, g_idx, deq = mf.gptq_quantize(value.float())
            tensors[module + ".qweight"] = qweight
            tensors[module + ".qzeros"] = qzeros
            tensors[module + ".scales"] = scales
            tensors[module + ".g_idx"] = g_idx
            deq_state[name] = deq
        else:
            half = value.to(torch.float16)
            tensors[name] = half.contiguous()
            deq_state[name] = half.to(torch.float32)
    if tied:
        deq_state["lm_head.weight"] = deq_state["model.embed_tokens.weight"]
    return tensors, deq_state


class RouterGap:
    """Records the smallest gap between the k-th and (k+1)-th softmax probability of every router call."""

    def __init__(self, model, top_k):
        self.gap = float("inf")
        self.top_k = top_k
        self.handles = [m.register_forward_hook(self.hook) for n, m in model.named_modules()
                        if n.endswith("mlp.gate") or n.endswith("block_sparse_moe.gate")]
        assert self.handles, "no router found"

    def hook(self, module, inputs, output):
        if isinstance(output, tuple):  # transformers 5 routers return (logits, weights, indices)
            output = output[0]
        p = torch.softmax(output.double().reshape(-1, output.shape[-1]), dim=-1)
        top = torch.topk(p, self.top_k + 1, dim=-1).values
        self.gap = min(self.gap, float((top[:, self.top_k - 1] - top[:, self.top_k]).min()))

    def remove(self):
        for h in self.handles:
            h.remove()


def references(model, ids, prompt, top_k):
    gaps = RouterGap(model, top_k)
    logits, new_ids, gap = mf.references(model, ids, prompt)
    gaps.remove()
    return logits, new_ids, gap, gaps.gap


def build(name, config_cls, tok, overrides, top_k, out_root):
    tok_dir, tok_vocab, bos, eos = mf.tokenizer_info(tok)
    vocab = (tok_vocab + 15) // 16 * 16
    for seed in range(200):
        gen = torch.Generator().manual_seed(2000 + seed)
        config = config_cls(**{**COMMON, **overrides, "vocab_size": vocab, "bos_token_id": bos, "eos_token_id": eos})
        config._attn_implementation = "eager"
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32).eval()
        mf.init_weights(model, gen)
        ids = torch.randint(0, tok_vocab, (mf.SEQ_LEN,), generator=gen).tolist()
        prompt = ids[:mf.PROMPT_LEN]
        logits, new_ids, gap, rgap = references(model, ids, prompt, top_k)
        if rgap < ROUTER_GAP or gap < mf.MIN_GAP:
            continue
        gptq_tensors, deq_state = quantize_checkpoint(model)
        deq_model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32).eval()
        deq_model.load_state_dict(deq_state, strict=True)
        q_logits, q_new_ids, q_gap, q_rgap = references(deq_model, ids, prompt, top_k)
        if q_gap >= mf.MIN_GAP and q_rgap >= ROUTER_GAP:
            break
    else:
        raise SystemExit(f"{name}: no seed gives top-2 gaps >= {mf.MIN_GAP} and router gaps >= {ROUTER_GAP}")

    info = {"generator": "scripts/make_moe_fixtures.py", "min_router_gap": min(rgap, q_rgap)}
    dense_dir = out_root / name
    shutil.rmtree(dense_dir, ignore_errors=True)
    model.save_pretrained(dense_dir, safe_serialization=True)
    (dense_dir / "generation_config.json").unlink(missing_ok=True)
    mf.copy_tokenizer(tok_dir, dense_dir)
    mf.write_reference(dense_dir, ids, prompt, logits, new_ids, gap, seed, {"format": "float32", **info})

    q_dir = out_root / (name + "-gptq")
    shutil.rmtree(q_dir, ignore_errors=True)
    q_dir.mkdir(parents=True)
    cfg = json.loads((dense_dir / "config.json").read_text())
    cfg["torch_dtype"] = "float16"
    cfg.pop("dtype", None)
    cfg["quantization_config"] = {
        "bits": mf.BITS, "group_size": mf.GROUP, "desc_act": False, "sym": True, "static_groups": False,
        "true_sequential": True, "damp_percent": 0.01, "lm_head": False, "quant_method": "gptq",
        "checkpoint_format": "gptq", "pack_dtype": "int32", "meta": {"quantizer": ["qlm-make-moe-fixtures:0.1"]},
    }
    (q_dir / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    save_file(gptq_tensors, str(q_dir / "model.safetensors"), metadata={"format": "pt"})
    mf.copy_tokenizer(tok_dir, q_dir)
    mf.write_reference(q_dir, ids, prompt, q_logits, q_new_ids, q_gap, seed,
                       {"format": "gptq int4 sym g32 v1 (experts, shared expert, attention; routers float16)",
                        "reference_weights": "dequantized, float32", **info})
    for d in (dense_dir, q_dir):
        for f in d.iterdir():
            f.chmod(0o644)
    sizes = [sum(f.stat().st_size for f in d.iterdir()) / 1e6 for d in (dense_dir, q_dir)]
    print(f"{name}: seed {seed}, vocab {vocab}, gaps {gap:.4f}/{q_gap:.4f}, router gaps {rgap:.4f}/{q_rgap:.4f}, "
          f"{sizes[0]:.2f} + {sizes[1]:.2f} MB")


def build_ct(name, top_k, out_root, group=32, calibration_rows=16):
    import compressed_tensors
    import llmcompressor
    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import GPTQModifier
    from transformers import PreTrainedTokenizerFast

    src = out_root / name
    expected = json.loads((src / "expected.json").read_text())
    ids, prompt = expected["tokens"], expected["greedy"]["prompt"]
    tok_vocab = json.loads((src / "config.json").read_text())["vocab_size"]
    scheme = {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": False,
                                                             "strategy": "group", "group_size": group}}}
    ignore = ["lm_head", "re:.*mlp\\.gate$", "re:.*block_sparse_moe\\.gate$", "re:.*shared_expert_gate$"]
    out = out_root / f"{name}-ct-w4a16"
    for calibration_seed in range(77, 97):
        model = AutoModelForCausalLM.from_pretrained(src, torch_dtype=torch.float32).eval()
        gen = torch.Generator().manual_seed(calibration_seed)
        rows = [torch.randint(0, tok_vocab - 16, (mf.SEQ_LEN,), generator=gen).tolist() for _ in range(calibration_rows)]
        dataset = Dataset.from_dict({"input_ids": rows, "attention_mask": [[1] * mf.SEQ_LEN for _ in rows]})
        tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(src / "tokenizer.json"), pad_token="<pad>")
        model = oneshot(model=model, recipe=GPTQModifier(config_groups=scheme, ignore=ignore), dataset=dataset,
                        tokenizer=tokenizer, num_calibration_samples=calibration_rows, max_seq_length=mf.SEQ_LEN)
        shutil.rmtree(out, ignore_errors=True)
        model.save_pretrained(out, save_compressed=True)
        (out / "generation_config.json").unlink(missing_ok=True)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            if (src / f).exists():
                shutil.copy(src / f, out / f)
        reloaded = AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32).eval()
        reloaded.config._attn_implementation = "eager"
        logits, new_ids, gap, rgap = references(reloaded, ids, prompt, top_k)
        if gap >= mf.MIN_GAP and rgap >= ROUTER_GAP:
            break
    else:
        raise SystemExit(f"{name}-ct-w4a16: no calibration seed gives clear gaps")
    mf.write_reference(out, ids, prompt, logits, new_ids, gap, expected["seed"], {
        "format": f"compressed-tensors pack-quantized W4A16 asym g{group} (llm-compressor GPTQModifier), routers ignored",
        "reference_weights": "decompressed by compressed-tensors on reload, float32",
        "calibration_seed": calibration_seed, "min_router_gap": rgap,
        "generator": "scripts/make_moe_fixtures.py ct",
        "compressed_tensors_version": compressed_tensors.__version__,
        "llmcompressor_version": llmcompressor.__version__,
    })
    for f in out.iterdir():
        f.chmod(0o644)
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"{name}-ct-w4a16: calibration seed {calibration_seed}, gaps {gap:.4f}, router {rgap:.4f}, {size / 1e6:.2f} MB")


def build_fp4(name, top_k, out_root, scheme="NVFP4A16"):
    import compressed_tensors
    import llmcompressor
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from make_tool_model_fixtures import fp4_reference_model

    src = out_root / name
    expected = json.loads((src / "expected.json").read_text())
    ids, prompt = expected["tokens"], expected["greedy"]["prompt"]
    ignore = ["lm_head", "re:.*mlp\\.gate$", "re:.*block_sparse_moe\\.gate$", "re:.*shared_expert_gate$"]
    out = out_root / f"{name}-ct-{scheme.lower()}"
    model = AutoModelForCausalLM.from_pretrained(src, torch_dtype=torch.float32).eval()
    model = oneshot(model=model, recipe=QuantizationModifier(targets="Linear", scheme=scheme, ignore=ignore))
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out, save_compressed=True)
    (out / "generation_config.json").unlink(missing_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if (src / f).exists():
            shutil.copy(src / f, out / f)
    reference = fp4_reference_model(out, src)
    logits, new_ids, gap, rgap = references(reference, ids, prompt, top_k)
    if rgap < ROUTER_GAP:
        raise SystemExit(f"{out.name}: router gap {rgap:.2e} < {ROUTER_GAP}: the expert choice would hinge on rounding")
    mf.write_reference(out, ids, prompt, logits, new_ids, gap, expected["seed"], {
        "format": f"compressed-tensors {scheme} (llm-compressor QuantizationModifier, round to nearest), routers ignored",
        "reference_weights": "compressed-tensors dequantize of the saved tensors in float32",
        "min_router_gap": rgap,
        "generator": "scripts/make_moe_fixtures.py fp4",
        "compressed_tensors_version": compressed_tensors.__version__,
        "llmcompressor_version": llmcompressor.__version__,
    })
    for f in out.iterdir():
        f.chmod(0o644)
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"{out.name}: gaps {gap:.4f}, router {rgap:.4f}, {size / 1e6:.2f} MB")


def main():
    out_root = Path(sys.argv[1]) if len(sys.argv) > 1 else mf.ROOT / "tests" / "data" / "models"
    out_root.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    if len(sys.argv) > 2 and sys.argv[2] == "fp4":
        name = sys.argv[3] if len(sys.argv) > 3 else "qwen3-moe"
        scheme = sys.argv[4] if len(sys.argv) > 4 else "NVFP4A16"
        build_fp4(name, next(f[4] for f in FIXTURES if f[0] == name), out_root, scheme)
        return
    if len(sys.argv) > 2 and sys.argv[2] == "ct":
        for name, _, _, _, top_k in FIXTURES:
            build_ct(name, top_k, out_root)
        return
    for fixture in FIXTURES:
        build(*fixture, out_root)


if __name__ == "__main__":
    main()
