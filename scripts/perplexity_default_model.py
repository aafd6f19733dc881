#!/usr/bin/env python3
"""Held-out perplexity of the default model: with transformers (float or any checkpoint it loads) or
with `qlm logits` (any format qlm loads). Same windows as scripts/train_default_model.py: the test
fortunes as <|begin_of_text|> text <|end_of_text|>, concatenated, cut into windows of 256 tokens,
each scored on its own.

  python3 scripts/perplexity_default_model.py --hf .trained/float
  python3 scripts/perplexity_default_model.py --qlm build/default/qlm models/default
  python3 scripts/perplexity_default_model.py --qlm build/default/qlm models/default --text tests/data/default_model/heldout.txt
"""
import argparse
import concurrent.futures
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_default_model as tdm  # noqa: E402


def read_logits(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    info = header["logits"]
    assert info["dtype"] == "F32", info
    b, e = info["data_offsets"]
    return np.frombuffer(data[b:e], dtype=np.float32).reshape(info["shape"])


def nll_sum(logits, ids):
    x = logits[:-1].astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    lse = (m[:, 0] + np.log(np.exp(x - m).sum(axis=1)))
    return float((lse - x[np.arange(len(ids) - 1), ids[1:]]).sum())


def qlm_window(binary, model, ids, threads):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "l.safetensors")
        cmd = [binary, "logits", model, "--tokens", " ".join(map(str, ids)), "--out", out]
        if threads:
            cmd += ["--threads", str(threads)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])} failed ({r.returncode}): {r.stderr[-2000:]}")
        return nll_sum(read_logits(out), ids)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hf", metavar="MODEL_DIR")
    ap.add_argument("--qlm", nargs=2, metavar=("QLM_BINARY", "MODEL_DIR"))
    ap.add_argument("--corpus", default=".corpus")
    ap.add_argument("--text", help="score this file (fortunes separated by lines of %%) instead of the test split")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=0, help="--threads for qlm (0: its default)")
    args = ap.parse_args()
    model_dir = args.hf or (args.qlm[1] if args.qlm else None)
    if not model_dir:
        sys.exit("pass --hf MODEL_DIR or --qlm QLM_BINARY MODEL_DIR")

    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    if args.text:
        with open(args.text, encoding="utf-8") as f:
            texts = [t.strip("\n") for t in f.read().split("\n%\n") if t.strip()]
    else:
        texts = tdm.split_fortunes(tdm.read_fortunes(args.corpus))[2]
    wins = tdm.windows(tdm.encode_stream(tok, texts))
    count = sum(len(w) - 1 for w in wins)

    if args.hf:
        import torch
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained(args.hf, torch_dtype=torch.float32).eval()
        total = 0.0
        with torch.no_grad():
            for w in wins:
                logits = model(input_ids=torch.tensor([w])).logits[0].numpy()
                total += nll_sum(logits, w)
        what = f"transformers fp32 on {args.hf}"
    else:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
            total = sum(ex.map(lambda w: qlm_window(args.qlm[0], args.qlm[1], w, args.threads), wins))
        what = f"qlm logits on {args.qlm[1]}"
    loss = total / count
    print(json.dumps({"model": what, "windows": len(wins), "tokens": count, "loss": loss, "ppl": math.exp(loss)}))


if __name__ == "__main__":
    main()
