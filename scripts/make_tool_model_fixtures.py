#!/usr/bin/env python3
"""Model fixtures quantized by the real tools: the float fixtures of scripts/make_model_fixtures.py
(same architectures, same seeded weights) run through
  - llm-compressor's GPTQ (`GPTQModifier`, the GPTQ algorithm with calibration, not round-to-nearest)
    into compressed-tensors `pack-quantized` W4A16, asymmetric, group 32, saved with
    `save_pretrained(save_compressed=True)`  ->  <name>-ct-w4a16/
  - AutoAWQ 0.2.9 (`AutoAWQForCausalLM.quantize`, activation-aware scaling; clipping search off
    because these layers are narrower than its 64-channel batches) into the AWQ GEMM layout,
    4-bit, zero points, group 32, saved with `save_quantized`  ->  <name>-awq/

Run with the fixture venv (torch CPU, transformers, compressed-tensors, llm-compressor, and
`pip install --no-deps autoawq==0.2.9`), after make_model_fixtures.py wrote the float fixtures:
    /opt/fixvenv/bin/python3 scripts/make_tool_model_fixtures.py [OUT_DIR] [ct|awq] [NAME ...]

Each directory holds the checkpoint as the tool saved it, the tokenizer, and the references the
model tests read (reference.safetensors, expected.json; same fields as make_model_fixtures.py):
the Hugging Face implementation in float32 on the tool's own dequantization of the int4 weights —
compressed-tensors decompressing on reload, and AutoAWQ's `dequantize_gemm` for AWQ.
"""
import json
import shutil
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)

import compressed_tensors  # noqa: E402
import llmcompressor  # noqa: E402
from datasets import Dataset  # noqa: E402
from llmcompressor import oneshot  # noqa: E402
from llmcompressor.modifiers.quantization import GPTQModifier  # noqa: E402
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_model_fixtures as base  # noqa: E402

ROOT = base.ROOT
NAMES = ["llama-gqa", "qwen2-bias-tied", "qwen3-qknorm", "mistral-swa"]
# AutoAWQ 0.2.9 cannot hook qwen2 layers of transformers 4.57 (its Catcher lacks `attention_type`).
AWQ_NAMES = ["llama-gqa", "mistral-swa"]
GROUP = 32
CALIBRATION_ROWS = 16

W4A16_ASYM_G32 = {
    "group_0": {
        "targets": ["Linear"],
        "weights": {"num_bits": 4, "type": "int", "symmetric": False, "strategy": "group", "group_size": GROUP},
    }
}


def float_model(name):
    """The float fixture's model, rebuilt from its recorded seed exactly as make_model_fixtures.py built it."""
    _, config_cls, tok, overrides, _ = next(f for f in base.FIXTURES if f[0] == name)
    expected = json.loads((ROOT / "tests/data/models" / name / "expected.json").read_text())
    seed = expected["seed"]
    tok_dir, tok_vocab, bos, eos = base.tokenizer_info(tok)
    vocab = (tok_vocab + 15) // 16 * 16
    gen = torch.Generator().manual_seed(1000 + seed)
    config = config_cls(**{**base.COMMON, **overrides, "vocab_size": vocab, "bos_token_id": bos, "eos_token_id": eos})
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32).eval()
    base.init_weights(model, gen)
    ids = torch.randint(0, tok_vocab, (base.SEQ_LEN,), generator=gen).tolist()
    assert ids == expected["tokens"], f"{name}: rebuilt model does not reproduce the float fixture"
    return model, tok_dir, tok_vocab, ids, seed


def build(name, out_root):
    # An argmax decided by a top-2 gap below MIN_GAP makes the comparison fragile: try other
    # calibration sets (the model stays the float fixture's) until the references' gaps are clear.
    for calibration_seed in range(77, 97):
        gap = quantize(name, out_root, calibration_seed)
        if gap >= base.MIN_GAP:
            return
    print(f"  warning: no calibration seed gives a gap >= {base.MIN_GAP}; keeping the last")


def quantize(name, out_root, calibration_seed):
    model, tok_dir, tok_vocab, ids, seed = float_model(name)
    prompt = ids[: base.PROMPT_LEN]
    gen = torch.Generator().manual_seed(calibration_seed)
    rows = [torch.randint(0, tok_vocab, (base.SEQ_LEN,), generator=gen).tolist() for _ in range(CALIBRATION_ROWS)]
    dataset = Dataset.from_dict({"input_ids": rows, "attention_mask": [[1] * base.SEQ_LEN for _ in rows]})
    # oneshot wants a processor whenever a dataset is given; rows are token ids of equal length already.
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(tok_dir / "tokenizer.json"), pad_token="<pad>")
    recipe = GPTQModifier(config_groups=W4A16_ASYM_G32, ignore=["lm_head"])
    model = oneshot(model=model, recipe=recipe, dataset=dataset, tokenizer=tokenizer,
                    num_calibration_samples=CALIBRATION_ROWS, max_seq_length=base.SEQ_LEN)

    out = out_root / f"{name}-ct-w4a16"
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out, save_compressed=True)
    (out / "generation_config.json").unlink(missing_ok=True)
    base.copy_tokenizer(tok_dir, out)

    reloaded = AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32).eval()
    reloaded.config._attn_implementation = "eager"
    logits, new_ids, gap = base.references(reloaded, ids, prompt)
    base.write_reference(out, ids, prompt, logits, new_ids, gap, seed, {
        "format": f"compressed-tensors pack-quantized W4A16 asym g{GROUP} (llm-compressor GPTQModifier)",
        "reference_weights": "decompressed by compressed-tensors on reload, float32",
        "calibration_seed": calibration_seed,
        "generator": "scripts/make_tool_model_fixtures.py",
        "compressed_tensors_version": compressed_tensors.__version__,
        "llmcompressor_version": llmcompressor.__version__,
    })
    for f in out.iterdir():
        f.chmod(0o644)
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"{name}-ct-w4a16: calibration seed {calibration_seed}, min top-2 gap {gap:.4f}, {size / 1e6:.2f} MB")
    return gap


FP4_SCHEMES = {"nvfp4a16": "NVFP4A16", "mxfp4a16": "MXFP4A16"}
FP4_NAMES = ["llama-gqa", "qwen3-qknorm"]


def fp4_reference_model(out, float_dir):
    """transformers on the saved checkpoint with every quantized linear replaced by compressed-tensors' own
    dequantization of its tensors (its `dequantize` with the scheme's args, in float32: the decompressor would round
    the result to bfloat16), loaded from a float checkpoint of the same names with `float_dir`'s config (so
    transformers' own name conversions, e.g. fused MoE experts, apply as to any checkpoint)."""
    import tempfile
    from compressed_tensors.compressors.mx_utils import decompress_mx_scale
    from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8
    from compressed_tensors.quantization import QuantizationConfig
    from compressed_tensors.quantization.lifecycle.forward import dequantize
    from safetensors.torch import load_file, save_file
    config = json.loads((out / "config.json").read_text())["quantization_config"]
    qc = QuantizationConfig.model_validate(config)
    args = next(iter(qc.config_groups.values())).weights
    tensors = load_file(str(out / "model.safetensors"))
    state = {}
    for key in [k for k in tensors if k.endswith(".weight_packed")]:
        module = key[: -len(".weight_packed")]
        packed = tensors[key]
        codes = unpack_fp4_from_uint8(packed, packed.shape[0], packed.shape[1] * 2, dtype=torch.float32)
        scale = tensors[module + ".weight_scale"]
        scale = decompress_mx_scale(scale).float() if scale.dtype == torch.uint8 else scale.float()
        global_scale = tensors.get(module + ".weight_global_scale")
        state[module + ".weight"] = dequantize(x_q=codes, scale=scale, args=args, dtype=torch.float32,
                                               global_scale=None if global_scale is None else global_scale.float())
    for key, value in tensors.items():
        if not key.endswith((".weight_packed", ".weight_scale", ".weight_global_scale")):
            state[key] = value.float().contiguous()
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(Path(float_dir) / "config.json", Path(tmp) / "config.json")
        save_file(state, str(Path(tmp) / "model.safetensors"), metadata={"format": "pt"})
        model = AutoModelForCausalLM.from_pretrained(tmp, torch_dtype=torch.float32).eval()
    model.config._attn_implementation = "eager"
    return model


def build_fp4(name, out_root, suffix):
    from llmcompressor.modifiers.quantization import QuantizationModifier
    model, tok_dir, _, ids, seed = float_model(name)
    prompt = ids[: base.PROMPT_LEN]
    # llm-compressor 0.14 reads the model's config.json from name_or_path: the float fixture's.
    model.config.name_or_path = str(ROOT / "tests/data/models" / name)
    model = oneshot(model=model, recipe=QuantizationModifier(targets="Linear", scheme=FP4_SCHEMES[suffix],
                                                             ignore=["lm_head"]))
    out = out_root / f"{name}-ct-{suffix}"
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out, save_compressed=True)
    (out / "generation_config.json").unlink(missing_ok=True)
    base.copy_tokenizer(tok_dir, out)

    reference = fp4_reference_model(out, ROOT / "tests/data/models" / name)
    logits, new_ids, gap = base.references(reference, ids, prompt)
    base.write_reference(out, ids, prompt, logits, new_ids, gap, seed, {
        "format": f"compressed-tensors {FP4_SCHEMES[suffix]} (llm-compressor QuantizationModifier, round to nearest)",
        "reference_weights": "compressed-tensors dequantize of the saved tensors in float32",
        "generator": "scripts/make_tool_model_fixtures.py",
        "compressed_tensors_version": compressed_tensors.__version__,
        "llmcompressor_version": llmcompressor.__version__,
    })
    for f in out.iterdir():
        f.chmod(0o644)
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"{name}-ct-{suffix}: min top-2 gap {gap:.4f}, {size / 1e6:.2f} MB")


def awq_module():
    """AutoAWQ 0.2.9 imports a GELU class that transformers 4.57 renamed; alias it before importing."""
    import transformers.activations as activations
    if not hasattr(activations, "PytorchGELUTanh"):
        activations.PytorchGELUTanh = activations.GELUTanh
    import awq
    from awq import AutoAWQForCausalLM
    from awq.utils.packing_utils import dequantize_gemm
    return awq, AutoAWQForCausalLM, dequantize_gemm


def build_awq(name, out_root):
    awq, AutoAWQForCausalLM, dequantize_gemm = awq_module()
    from safetensors.torch import load_file
    src = ROOT / "tests/data/models" / name
    expected = json.loads((src / "expected.json").read_text())
    ids, seed = expected["tokens"], expected["seed"]
    prompt = ids[: base.PROMPT_LEN]
    _, _, tok, _, _ = next(f for f in base.FIXTURES if f[0] == name)
    tok_dir, tok_vocab, _, _ = base.tokenizer_info(tok)
    out = out_root / f"{name}-awq"
    best = None  # (gap, calibration seed): the clearest references over a few calibration sets
    for calibration_seed in list(range(5, 13)) + [None]:
        if calibration_seed is None:
            calibration_seed = best[1]
        elif best and best[0] >= base.MIN_GAP:
            calibration_seed = best[1]
        gen = torch.Generator().manual_seed(calibration_seed)
        calib = [torch.randint(0, tok_vocab, (base.SEQ_LEN,), generator=gen).tolist() for _ in range(CALIBRATION_ROWS)]
        model = AutoAWQForCausalLM.from_pretrained(str(src), torch_dtype=torch.float32, device_map="cpu")
        model.quantize(None, quant_config={"zero_point": True, "q_group_size": GROUP, "w_bit": 4, "version": "GEMM"},
                       calib_data=calib, max_calib_samples=CALIBRATION_ROWS, max_calib_seq_len=base.SEQ_LEN,
                       apply_clip=False)
        shutil.rmtree(out, ignore_errors=True)
        model.save_quantized(str(out))
        (out / "generation_config.json").unlink(missing_ok=True)

        # Reference: the float model with every quantized linear replaced by AutoAWQ's dequantization.
        tensors = load_file(str(out / "model.safetensors"))
        reference, _, _, _, _ = float_model(name)
        state = reference.state_dict()
        for key in [k for k in tensors if k.endswith(".qweight")]:
            module = key[: -len(".qweight")]
            # f32 scales: AutoAWQ's unpacking with the product (code - zero) * scale taken exactly, not
            # rounded to fp16 as it would be with the stored fp16 scales.
            w = dequantize_gemm(tensors[key], tensors[module + ".qzeros"], tensors[module + ".scales"].float(), 4, GROUP)
            state[module + ".weight"] = w.float().t().contiguous()
        for key, value in tensors.items():
            if not key.endswith((".qweight", ".qzeros", ".scales")):
                state[key] = value.float()
        if reference.config.tie_word_embeddings:
            state["lm_head.weight"] = state["model.embed_tokens.weight"]
        reference.load_state_dict(state, strict=True)
        logits, new_ids, gap = base.references(reference, ids, prompt)
        if best is not None and calibration_seed == best[1]:
            break
        best = max(best or (gap, calibration_seed), (gap, calibration_seed))
    base.copy_tokenizer(tok_dir, out)
    base.write_reference(out, ids, prompt, logits, new_ids, gap, seed, {
        "format": f"awq gemm 4-bit zero points g{GROUP} (AutoAWQ {awq.__version__})",
        "reference_weights": "AutoAWQ dequantize_gemm of the saved tensors with float32 scales, float32",
        "generator": "scripts/make_tool_model_fixtures.py",
        "calibration_seed": calibration_seed,
    })
    for f in out.iterdir():
        f.chmod(0o644)
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"{name}-awq: calibration seed {calibration_seed}, min top-2 gap {gap:.4f}, {size / 1e6:.2f} MB")


def main():
    args = sys.argv[1:]
    out_root = Path(args[0]) if args else ROOT / "tests" / "data" / "models"
    tools = [a for a in args[1:] if a in ("ct", "awq", "fp4")] or ["ct", "awq", "fp4"]
    names = [a for a in args[1:] if a not in ("ct", "awq", "fp4")]
    for name in names or NAMES:
        if "ct" in tools:
            build(name, out_root)
    for name in names or AWQ_NAMES:
        if "awq" in tools:
            build_awq(name, out_root)
    for name in names or FP4_NAMES:
        if "fp4" in tools:
            for suffix in FP4_SCHEMES:
                build_fp4(name, out_root, suffix)


if __name__ == "__main__":
    main()
