#!/usr/bin/env python3
"""Quantizes the float default model (scripts/train_default_model.py) to int4 with llmcompressor's
GPTQ W4A16 recipe and writes a compressed-tensors pack-quantized checkpoint to models/default.

Tested with llmcompressor 0.11.0 / compressed-tensors 0.16.0 / transformers 4.57.6 / torch 2.11 (CPU):
  pip install -c <(printf 'torch==2.11.0\\ntransformers==4.57.6\\n') llmcompressor==0.11.0
  python3 scripts/quantize_default_model.py --float .trained/float --corpus .corpus --out models/default

Scheme: int4 weights, symmetric, group size 128 (the W4A16 preset), activations unquantized, every
Linear of the decoder layers quantized; the (tied) embedding / lm_head stays bf16. Calibration: 256
windows of 256 tokens from the train split of the fortunes (never the held-out test split).
"""
import argparse
import json
import os
import random
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_default_model as tdm  # noqa: E402


def die(msg):
    print(f"quantize_default_model: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def normalize_float_dir(src, dst):
    """Copies the float model, writing its config in the spelling every transformers version and qlm
    read (the device machine's transformers 5 writes rope_parameters and dtype only)."""
    os.makedirs(dst, exist_ok=True)
    for name in ("model.safetensors", "tokenizer.json", "generation_config.json"):
        shutil.copy(os.path.join(src, name), os.path.join(dst, name))
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    rope = cfg.get("rope_parameters") or {}
    cfg.setdefault("rope_theta", rope.get("rope_theta", 10000.0))
    cfg.setdefault("rope_scaling", None)
    cfg.setdefault("torch_dtype", cfg.get("dtype", "bfloat16"))
    cfg.pop("rope_parameters", None)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(src, "tokenizer_config.json")) as f:
        tcfg = json.load(f)
    tcfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    tcfg.pop("backend", None)
    with open(os.path.join(dst, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--float", required=True, help="float model folder written by train_default_model.py")
    ap.add_argument("--corpus", default=".corpus")
    ap.add_argument("--out", default="models/default")
    ap.add_argument("--group-size", type=int, default=128)
    ap.add_argument("--samples", type=int, default=256)
    args = ap.parse_args()

    import torch
    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import GPTQModifier
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    torch.manual_seed(tdm.SEED)
    norm = args.out.rstrip("/") + ".float-normalized"
    normalize_float_dir(args.float, norm)

    tok = Tokenizer.from_file(os.path.join(norm, "tokenizer.json"))
    train, _, _ = tdm.split_fortunes(tdm.read_fortunes(args.corpus))
    ids = tdm.encode_stream(tok, train)
    rng = random.Random(tdm.SEED)
    starts = [rng.randrange(0, len(ids) - tdm.SEQ_LEN) for _ in range(args.samples)]
    calib = Dataset.from_dict({"input_ids": [ids[s:s + tdm.SEQ_LEN] for s in starts],
                               "attention_mask": [[1] * tdm.SEQ_LEN for _ in starts]})

    model = AutoModelForCausalLM.from_pretrained(norm, torch_dtype=torch.bfloat16)
    if args.group_size == 128:
        recipe = GPTQModifier(targets="Linear", scheme="W4A16", ignore=["lm_head"])
    else:
        recipe = GPTQModifier(
            ignore=["lm_head"],
            config_groups={"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": args.group_size}}})
    oneshot(model=model, dataset=calib, recipe=recipe, max_seq_length=tdm.SEQ_LEN, num_calibration_samples=args.samples)
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    model.save_pretrained(args.out, save_compressed=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(os.path.join(norm, name), os.path.join(args.out, name))
    for extra in ("recipe.yaml",):
        p = os.path.join(args.out, extra)
        if os.path.exists(p):
            os.remove(p)
    shutil.rmtree(norm)
    with open(os.path.join(args.out, "config.json")) as f:
        cfg = json.load(f)
    if "quantization_config" not in cfg:
        die("the written config.json has no quantization_config")
    print(json.dumps(cfg["quantization_config"], indent=1))
    print(f"wrote {args.out}: " + ", ".join(f"{n} {os.path.getsize(os.path.join(args.out, n))} B"
                                           for n in sorted(os.listdir(args.out))))


if __name__ == "__main__":
    main()
