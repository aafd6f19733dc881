#!/usr/bin/env python3
"""Trains qlm's embedded default model: a byte-level BPE tokenizer and a small LlamaForCausalLM on the
public-domain English text of the Debian `fortunes` package (/usr/share/games/fortunes).

Needs torch, transformers and tokenizers. Deterministic for a given corpus, seed and device.

  # Copy the corpus into the repo (ignored by git) so that it travels to the device machine:
  mkdir -p .corpus && cp $(ls /usr/share/games/fortunes/* | grep -v '\\.dat$' | grep -v '\\.u8$') .corpus/
  # On a GPU machine: sweep a few schedules in parallel, keep the one with the best validation loss.
  PYTHONUNBUFFERED=1 python3 scripts/train_default_model.py --corpus .corpus --out OUT --sweep 10:2e-3,20:2e-3,40:1e-3
  # Reproduce the held-out split (used by the perplexity measurements) without training:
  python3 scripts/train_default_model.py --corpus .corpus --write-splits DIR

Splits (seeded, by fortune): 5% test (held out; perplexity), 2.5% validation (checkpoint selection),
the rest train (tokenizer and model). Every fortune is encoded as <|begin_of_text|> text <|end_of_text|>
and the train fortunes are concatenated into one token stream that batches sample random windows from.
Held-out loss: the test fortunes concatenated the same way, cut into consecutive windows of SEQ_LEN
tokens; each window is scored on its own (positions 1..n-1 predicted from their prefix).
"""
import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time

BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"
SEED = 1234
SEQ_LEN = 256
VOCAB_SIZE = 4096
MODEL_DIMS = dict(hidden_size=256, intermediate_size=768, num_hidden_layers=6, num_attention_heads=4,
                  num_key_value_heads=2)


def die(msg):
    print(f"train_default_model: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


# ----------------------------------------------------------------------------------------------------
# Corpus


def read_fortunes(corpus_dir):
    """All fortunes of the text files in corpus_dir (no .dat index files, no .u8 links, no folders:
    the offensive collections live in a subfolder when installed), in a fixed order."""
    if not os.path.isdir(corpus_dir):
        die(f"corpus folder {corpus_dir!r} does not exist")
    fortunes = []
    names = sorted(n for n in os.listdir(corpus_dir)
                   if not n.endswith((".dat", ".u8")) and os.path.isfile(os.path.join(corpus_dir, n))
                   and not os.path.islink(os.path.join(corpus_dir, n)))
    if not names:
        die(f"no fortune files in {corpus_dir!r}")
    for name in names:
        with open(os.path.join(corpus_dir, name), "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
        current = []
        for line in text.split("\n"):
            if line.strip() == "%":
                fortunes.append("\n".join(current))
                current = []
            else:
                current.append(line.rstrip())
        fortunes.append("\n".join(current))
    fortunes = [f.strip("\n") for f in fortunes]
    return [f for f in fortunes if f.strip()]


def split_fortunes(fortunes, seed=SEED):
    order = list(range(len(fortunes)))
    random.Random(seed).shuffle(order)
    n_test = round(0.05 * len(order))
    n_val = round(0.025 * len(order))
    test = [fortunes[i] for i in sorted(order[:n_test])]
    val = [fortunes[i] for i in sorted(order[n_test:n_test + n_val])]
    train = [fortunes[i] for i in sorted(order[n_test + n_val:])]
    return train, val, test


def write_splits(corpus_dir, out_dir):
    train, val, test = split_fortunes(read_fortunes(corpus_dir))
    os.makedirs(out_dir, exist_ok=True)
    for name, part in (("train", train), ("val", val), ("test", test)):
        with open(os.path.join(out_dir, f"{name}.txt"), "w", encoding="utf-8") as f:
            f.write("\n%\n".join(part) + "\n")
    print(f"wrote {len(train)}/{len(val)}/{len(test)} fortunes to {out_dir}")


# ----------------------------------------------------------------------------------------------------
# Tokenizer


def train_tokenizer(texts, vocab_size=VOCAB_SIZE):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B",
                                                       special_tokens=[(BOS, bos_id)])
    if tok.get_vocab_size() != vocab_size:
        print(f"note: tokenizer vocabulary is {tok.get_vocab_size()} (asked for {vocab_size})")
    return tok


def encode_stream(tok, texts):
    """<|begin_of_text|> text <|end_of_text|> for every text, concatenated."""
    eos_id = tok.token_to_id(EOS)
    ids = []
    for enc in tok.encode_batch(texts):
        ids.extend(enc.ids)
        ids.append(eos_id)
    return ids


def windows(ids, seq_len=SEQ_LEN):
    return [ids[i:i + seq_len] for i in range(0, len(ids), seq_len) if len(ids[i:i + seq_len]) >= 2]


# ----------------------------------------------------------------------------------------------------
# Model


@__import__("functools").lru_cache(None)
def _torch():
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    return torch


def make_model(vocab_size, bos_id, eos_id):
    torch = _torch()
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab_size, max_position_embeddings=1024, rms_norm_eps=1e-5, rope_theta=10000.0,
                         tie_word_embeddings=True, bos_token_id=bos_id, eos_token_id=eos_id, hidden_act="silu",
                         attention_bias=False, mlp_bias=False, initializer_range=0.02, **MODEL_DIMS)
    torch.manual_seed(SEED)
    return LlamaForCausalLM(config)


def heldout_loss(model, wins, device, batch=64):
    """Mean next-token cross-entropy (nats) over all predicted positions of all windows."""
    torch = _torch()
    import torch.nn.functional as F

    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(wins), batch):
            group = wins[i:i + batch]
            # Windows differ in length only at the very end: those are scored one by one.
            same = [w for w in group if len(w) == SEQ_LEN]
            rest = [w for w in group if len(w) != SEQ_LEN]
            for chunk in ([same] if same else []) + [[w] for w in rest]:
                x = torch.tensor(chunk, dtype=torch.long, device=device)
                logits = model(input_ids=x).logits.float()
                ce = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum")
                total += ce.item()
                count += x[:, 1:].numel()
    model.train()
    return total / count


def train_one(args):
    torch = _torch()
    import torch.nn.functional as F

    random.seed(SEED)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    t0 = time.time()

    train, val, test = split_fortunes(read_fortunes(args.corpus))
    print(f"fortunes: train {len(train)}, val {len(val)}, test {len(test)}")
    tok = train_tokenizer(train)
    bos_id, eos_id = tok.token_to_id(BOS), tok.token_to_id(EOS)
    train_ids = encode_stream(tok, train)
    val_wins = windows(encode_stream(tok, val))
    test_wins = windows(encode_stream(tok, test))
    print(f"tokens: train {len(train_ids)}, val {sum(map(len, val_wins))}, test {sum(map(len, test_wins))} "
          f"(tokenizer {time.time() - t0:.1f} s)")

    model = make_model(tok.get_vocab_size(), bos_id, eos_id).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters, {json.dumps(MODEL_DIMS)}")

    data = torch.tensor(train_ids, dtype=torch.long)
    tokens_per_step = args.batch * SEQ_LEN
    steps = max(1, int(args.epochs * len(train_ids) / tokens_per_step)) if args.max_steps <= 0 else args.max_steps
    warmup = min(100, steps // 10)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
                            fused=(device == "cuda"))

    def lr_at(step):
        if step < warmup:
            return args.lr * (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))

    gen = torch.Generator().manual_seed(SEED)
    best = (float("inf"), -1, None)
    eval_every = max(50, steps // 40)
    print(f"schedule: {steps} steps of {args.batch}x{SEQ_LEN} tokens ({args.epochs} epochs), lr {args.lr}, "
          f"warmup {warmup}, cosine to 10%, weight decay {args.weight_decay}, eval every {eval_every}")
    model.train()
    t_train = time.time()
    step = 0
    train_loss_ema = None
    while step < steps:
        if time.time() - t_train > args.time_budget:
            print(f"time budget of {args.time_budget} s reached at step {step}/{steps}")
            steps = step  # evaluate once more below, then stop
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        starts = torch.randint(0, len(train_ids) - SEQ_LEN - 1, (args.batch,), generator=gen)
        batch = torch.stack([data[s:s + SEQ_LEN + 1] for s in starts.tolist()]).to(device, non_blocking=True)
        with torch.autocast(device_type="cuda" if device == "cuda" else "cpu", dtype=torch.bfloat16):
            logits = model(input_ids=batch[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        if not torch.isfinite(loss):
            die(f"non-finite loss at step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        lv = loss.item() if step % 10 == 0 or step == steps else None
        if lv is not None:
            train_loss_ema = lv if train_loss_ema is None else 0.9 * train_loss_ema + 0.1 * lv
        if step % eval_every == 0 or step == steps or time.time() - t_train > args.time_budget:
            v = heldout_loss(model, val_wins, device)
            mark = ""
            if v < best[0]:
                best = (v, step, {k: t.detach().clone() for k, t in model.state_dict().items()})
                mark = " *"
            print(f"step {step:5d}  lr {lr_at(step - 1):.2e}  train {train_loss_ema:.4f}  val {v:.4f}  "
                  f"({time.time() - t_train:.0f} s){mark}")
    if best[2] is None:
        die("no evaluation happened")
    model.load_state_dict(best[2])
    model = model.to(torch.bfloat16).to(torch.float32)  # score exactly the weights that are saved (bf16)
    train_eval = heldout_loss(model, windows(train_ids)[:len(test_wins)], device)
    val_loss = heldout_loss(model, val_wins, device)
    test_loss = heldout_loss(model, test_wins, device)
    summary = dict(best_step=best[1], steps=step, epochs=args.epochs, lr=args.lr, parameters=n_params,
                   train_loss=train_eval, val_loss=val_loss, test_loss=test_loss, test_ppl=math.exp(test_loss),
                   test_tokens=sum(len(w) - 1 for w in test_wins), seconds=time.time() - t0)
    print("result: " + json.dumps(summary))

    from transformers import GenerationConfig, PreTrainedTokenizerFast

    os.makedirs(args.out, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(args.out, safe_serialization=True)
    GenerationConfig(bos_token_id=bos_id, eos_token_id=eos_id, do_sample=False).save_pretrained(args.out)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, model_max_length=1024)
    fast.save_pretrained(args.out)
    for extra in ("special_tokens_map.json",):
        p = os.path.join(args.out, extra)
        if os.path.exists(p):
            os.remove(p)
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(summary, f, indent=1)

    # A sample, so the log shows what the model writes.
    model = model.to(torch.float32).eval()
    x = torch.tensor([tok.encode("The meaning of life is").ids], device=device)
    with torch.no_grad():
        y = model.generate(x, max_new_tokens=40, do_sample=False, eos_token_id=eos_id, pad_token_id=eos_id)
    print("sample: " + repr(tok.decode(y[0].tolist(), skip_special_tokens=False)))


def sweep(args):
    """Runs one training process per EPOCHS:LR entry in parallel, then copies the run with the lowest
    validation loss (never the test loss) to --out, with all logs concatenated into train.log."""
    runs = []
    for i, entry in enumerate(args.sweep.split(",")):
        epochs, lr = entry.split(":")
        out = os.path.join(args.work, f"run{i}_e{epochs}_lr{lr}")
        os.makedirs(out, exist_ok=True)
        log = open(os.path.join(out, "log.txt"), "w")
        cmd = [sys.executable, os.path.abspath(__file__), "--corpus", args.corpus, "--out", out, "--epochs", epochs,
               "--lr", lr, "--batch", str(args.batch), "--time-budget", str(args.time_budget),
               "--weight-decay", str(args.weight_decay), "--max-steps", str(args.max_steps)]
        env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="2")
        runs.append((entry, out, log, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)))
    results = []
    for entry, out, log, proc in runs:
        rc = proc.wait()
        log.close()
        print(f"run {entry}: exit {rc}")
        rp = os.path.join(out, "result.json")
        if rc == 0 and os.path.exists(rp):
            with open(rp) as f:
                results.append((json.load(f), entry, out))
    if not results:
        for _, out, _, _ in runs:
            with open(os.path.join(out, "log.txt")) as f:
                sys.stderr.write(f.read())
        die("every training run failed")
    results.sort(key=lambda r: r[0]["val_loss"])
    res, entry, best_dir = results[0]
    os.makedirs(args.out, exist_ok=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "generation_config.json", "result.json"):
        shutil.copy(os.path.join(best_dir, name), os.path.join(args.out, name))
    with open(os.path.join(args.out, "train.log"), "w") as f:
        f.write(f"selected run {entry} (lowest validation loss)\n")
        for r, e, _ in results:
            f.write(f"  {e}: val {r['val_loss']:.4f} test {r['test_loss']:.4f} train {r['train_loss']:.4f}\n")
        for e, out, _, _ in runs:
            with open(os.path.join(out, "log.txt")) as lf:
                f.write(f"\n===== run {e} =====\n" + lf.read())
    print(f"selected {entry}: " + json.dumps(res))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=".corpus")
    ap.add_argument("--out")
    ap.add_argument("--write-splits", metavar="DIR")
    ap.add_argument("--sweep", help="comma-separated EPOCHS:LR runs trained in parallel; the best by validation wins")
    ap.add_argument("--work", default="/tmp/qlm_default_model_runs")
    ap.add_argument("--epochs", type=float, default=20)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--max-steps", type=int, default=0, help="override the step count (smoke tests)")
    ap.add_argument("--time-budget", type=float, default=240, help="seconds of training per run at most")
    ap.add_argument("--device")
    args = ap.parse_args()
    if args.write_splits:
        write_splits(args.corpus, args.write_splits)
    elif not args.out:
        die("--out is required")
    elif args.sweep:
        sweep(args)
    else:
        train_one(args)


if __name__ == "__main__":
    main()
