#!/usr/bin/env python3
"""Builds the tokenizer test fixtures in tests/data/tokenizers/ with the reference libraries.

No model can be downloaded here, so small tokenizers are *trained* in configurations that mirror the
real families (GPT-2, Llama-3, Qwen2, Llama-2 tokenizer.json, Mistral-style Metaspace, DeepSeek-style Digits, and
a raw SentencePiece tokenizer.model), then a varied text set is encoded and decoded with the reference
library. The C++ tests must reproduce every id and decoded string exactly.

Pinned versions (the output depends on them):
    pip install tokenizers==0.21.1 sentencepiece==0.1.97
    apt-get install fortunes      # training corpus: /usr/share/games/fortunes (public-domain quotes)

Everything is seeded; running the script twice gives byte-identical files.
Usage: scripts/make_tokenizer_fixtures.py [--out tests/data/tokenizers]
"""

import argparse
import json
import os
import random
import shutil
import tempfile
from pathlib import Path

import sentencepiece as spm
import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

EXPECTED_VERSIONS = {"tokenizers": "0.21.1", "sentencepiece": "0.1.97"}
SEED = 20240611
FORTUNE_DIR = Path("/usr/share/games/fortunes")
FORTUNE_FILES = ["fortunes", "computers", "science", "wisdom", "literature", "people", "platitudes", "education"]

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Non-English lines mixed into the corpus so that some multi-byte merges exist.
UNICODE_LINES = [
    "Le café est très bon, à côté de l'église.",
    "Über den Wolken muß die Freiheit wohl grenzenlos sein.",
    "El niño comió piñas y jalapeños en España.",
    "Москва — столица России. Привет, мир!",
    "日本語のテキストです。東京は大きい都市です。",
    "中文文本测试，你好世界。",
    "한국어 문장입니다.",
    "Emoji: 😀 🎉 👍🏽 ❤️ 🚀",
    "Ελληνικά: καλημέρα κόσμε",
    "עברית: שלום עולם",
    "العربية: مرحبا بالعالم",
]

SPECIAL_TEXTS = {
    "gpt2": ["<|endoftext|>", "Hello<|endoftext|>world", "a <mask> b", "x<mask>y", "<mask>  <mask>"],
    "llama3": ["<|begin_of_text|>Hello", "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
               "text<|end_of_text|>", "<|reserved_special_token_0|><|eot_id|>"],
    "qwen2": ["<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>",
              "<think>\nreasoning\n</think>\n\nanswer", "<|endoftext|><|endoftext|>", "a<think>b"],
    "llama2": ["<s>Hello</s>", "Hello <s> world", "[INST] Hi [/INST]", "</s>"],
    "mistral": ["<s>[INST] Hi [/INST]", "Hello </s> world", "<unk>"],
    "digits": ["<｜begin▁of▁sentence｜>x 12345", "<｜end▁of▁sentence｜>"],
    "spm": [],
}


def fixed_texts():
    return [
        "",
        "Hello world",
        "Hello, world! How are you today?",
        " leading space",
        "trailing space ",
        "   three leading spaces",
        "multiple   spaces    inside",
        "tabs\there\t\tand\tthere",
        "line one\nline two\n\nline four\r\nwindows line\r\n",
        "\n\n\n",
        "    \n    indented\n",
        "Numbers: 1234567 and 3.14159 and 1,000,000 and 42",
        "1234567890123",
        "I'm sure you're right, they'll see we've done it. He'd say it's JOHN'S.",
        "Don't STOP! I'M HERE.",
        "Punctuation!!! ??? ... --- *** ((( ))) [[[ ]]] {{{ }}}",
        "email@example.com https://example.org/path?q=1&r=2#frag",
        "def f(x):\n    return x ** 2  # square\n",
        "Café naïve résumé coöperate façade",
        "e\u0301 versus \u00e9 (combining acute vs precomposed)",
        "A\u030a\u0308 stacked combining marks",
        "日本語のテキストです。",
        "中文文本测试",
        "한국어 문장입니다.",
        "Emoji: 😀🎉 👍🏽 ❤️ 🚀 👨‍👩‍👧‍👦",
        "עברית: שלום עולם",
        "العربية: مرحبا بالعالم",
        "Mixed: abc日本def😀ghi",
        "\u00a0non-breaking\u00a0space and\u2003em space and\u3000ideographic space",
        "zero\u200bwidth\u200bspace",
        "ALL CAPS SENTENCE WITH NUMBERS 99 AND 100",
        "a",
        " ",
        "  ",
        "\t",
        "▁already▁has▁metaspace",
        "<0x41> looks like a byte token",
        "Arabic-Indic digits ٣٤٥ and fullwidth １２３４ and superscript ²³",
        "x's y'S z'LL w'Ve",
        "line separator and paragraph separator",
        "verticaltab and formfeed",
        "ﬁ ligature and Ω ohm and Å angstrom",
    ]


def random_texts(rng, fortunes, count=80):
    """Seeded random strings: shuffles of characters from many classes, and corpus sentences."""
    pool = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") + list(" \t\n\r'\".,;:!?-_()[]{}<>/\\@#$%^&*+=~`|")
            + [" ", " ", "  ", "\n\n", "'s", "'ll", "'T"] + list("éèêàçñüößøåæœÉ") + list("日本語中文한국어") + ["😀", "🎉", "👍🏽", "❤️"]
            + ["\u0301", "\u0308", "\u00a0", "\u200b", "ا", "ש"])
    texts = []
    for _ in range(count // 2):
        n = rng.randint(1, 60)
        texts.append("".join(rng.choice(pool) for _ in range(n)))
    for _ in range(count - count // 2):
        texts.append(rng.choice(fortunes))
    texts.append("\n\n".join(rng.sample(fortunes, 20)))  # a long text: one word without a pre-tokenizer
    return texts


def load_fortunes():
    entries = []
    for name in FORTUNE_FILES:
        raw = (FORTUNE_DIR / name).read_bytes().decode("utf-8", errors="replace")
        for entry in raw.split("\n%\n"):
            entry = entry.strip("\n%")
            # Some fortunes use backspace overstriking for emphasis; drop those characters.
            entry = "".join(c for c in entry if c == "\n" or c == "\t" or c >= " ")
            if entry:
                entries.append(entry)
    return entries


def corpus_lines(rng, fortunes, count=3000):
    chosen = rng.sample(fortunes, min(count, len(fortunes)))
    return chosen + UNICODE_LINES * 20


def byte_level_trainer(vocab_size, special_tokens):
    return trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=special_tokens)


def build_gpt2(lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train_from_iterator(lines, byte_level_trainer(900, ["<|endoftext|>"]))
    tok.add_tokens([tokenizers.AddedToken("<mask>", lstrip=True, special=False, normalized=False)])
    doc = json.loads(tok.to_str())
    # GPT-2's own files list merges as "a b" strings; newer files use [a, b] pairs. Cover both.
    doc["model"]["merges"] = [" ".join(pair) for pair in doc["model"]["merges"]]
    return Tokenizer.from_str(json.dumps(doc)), {"config.json": {"bos_token_id": 0, "eos_token_id": 0}}


def build_llama3(lines):
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eot_id|>"]
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(lines, byte_level_trainer(1200, []))
    # Llama-3 appends its special tokens after the BPE vocabulary.
    tok.add_special_tokens(specials)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A:0 <|begin_of_text|>:1 $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)]),
    ])
    configs = {
        "config.json": {"bos_token_id": bos, "eos_token_id": tok.token_to_id("<|end_of_text|>")},
        "generation_config.json": {"bos_token_id": bos,
                                   "eos_token_id": [tok.token_to_id("<|end_of_text|>"), tok.token_to_id("<|eot_id|>")]},
    }
    return tok, configs


def build_qwen2(lines):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.train_from_iterator(lines, byte_level_trainer(1000, []))
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    # Qwen3 ships <think> and </think> as added tokens that are not special.
    tok.add_tokens([tokenizers.AddedToken("<think>", special=False, normalized=False),
                    tokenizers.AddedToken("</think>", special=False, normalized=False)])
    configs = {"config.json": {"bos_token_id": tok.token_to_id("<|endoftext|>"),
                               "eos_token_id": tok.token_to_id("<|im_end|>")},
               "tokenizer_config.json": {"eos_token": "<|im_end|>", "bos_token": None}}
    return tok, configs


def build_digits(lines):
    """DeepSeek-style: digits cut one by one before the word pattern."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(lines, byte_level_trainer(700, ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"]))
    tok.post_processor = processors.TemplateProcessing(single="<｜begin▁of▁sentence｜> $A",
                                                       special_tokens=[("<｜begin▁of▁sentence｜>", 0)])
    return tok, {}


def spm_bpe_base(lines, vocab_size):
    """A BPE with byte fallback trained on Metaspace words, vocabulary laid out like Llama-2's."""
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens)
    tok.train_from_iterator(lines, trainer)
    doc = json.loads(tok.to_str())
    # Byte tokens belong to the model vocabulary, not to the added tokens.
    doc["added_tokens"] = [t for t in doc["added_tokens"] if t["content"] in ("<unk>", "<s>", "</s>")]
    return doc


def build_llama2(lines):
    doc = spm_bpe_base(lines, 900)
    doc["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    doc["pre_tokenizer"] = None
    doc["post_processor"] = json.loads(processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]).__getstate__())
    doc["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    tok = Tokenizer.from_str(json.dumps(doc))
    configs = {"config.json": {"bos_token_id": 1, "eos_token_id": 2},
               "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True}}
    return tok, configs


def build_mistral(lines):
    doc = spm_bpe_base(lines, 700)
    doc["normalizer"] = None
    doc["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
    doc["post_processor"] = json.loads(processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", 1)]).__getstate__())
    doc["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
    tok = Tokenizer.from_str(json.dumps(doc))
    configs = {"tokenizer_config.json": {"bos_token": {"content": "<s>", "special": True},
                                         "eos_token": {"content": "</s>", "special": True}}}
    return tok, configs


def build_spm_model(lines, out_dir):
    spm.set_random_generator_seed(SEED)
    # The model records its input and output paths, so they must not be random.
    tmp = Path(tempfile.gettempdir()) / "qlm-spm-fixture"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("\n".join(line.replace("\n", " ") for line in lines), encoding="utf-8")
        spm.SentencePieceTrainer.train(
            input=str(corpus), model_prefix=str(Path(tmp) / "m"), model_type="bpe", vocab_size=800,
            byte_fallback=True, character_coverage=0.9995, num_threads=1, split_digits=True,
            input_sentence_size=0, shuffle_input_sentence=False, bos_id=1, eos_id=2, unk_id=0, minloglevel=2)
        shutil.copy(Path(tmp) / "m.model", out_dir / "tokenizer.model")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return spm.SentencePieceProcessor(model_file=str(out_dir / "tokenizer.model"))


def decode_only_cases(rng, ids_list):
    """Id runs cut at arbitrary points (possibly inside a UTF-8 sequence) for decode-only checks."""
    cases = []
    for ids in ids_list:
        if len(ids) < 2:
            continue
        a = rng.randrange(0, len(ids))
        b = rng.randrange(a + 1, len(ids) + 1)
        cases.append(ids[a:b])
    return cases


def hf_cases(tok, texts, rng):
    cases = []
    for text in texts:
        with_special = tok.encode(text, add_special_tokens=True).ids
        without = tok.encode(text, add_special_tokens=False).ids
        cases.append({
            "text": text,
            "ids": with_special,
            "ids_no_special": without,
            "decoded": tok.decode(with_special, skip_special_tokens=True),
            "decoded_with_special": tok.decode(with_special, skip_special_tokens=False),
        })
    decodes = [{"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)}
               for ids in decode_only_cases(rng, [c["ids"] for c in cases])]
    return cases, decodes


def spm_cases(sp, texts, rng):
    cases = []
    for text in texts:
        ids = sp.encode(text)
        cases.append({"text": text, "ids": [sp.bos_id()] + ids, "ids_no_special": ids,
                      "decoded": sp.decode([sp.bos_id()] + ids)})
    decodes = [{"ids": ids, "decoded": sp.decode(ids)}
               for ids in decode_only_cases(rng, [c["ids_no_special"] for c in cases])]
    return cases, decodes


def write_json(path, value):
    path.write_text(json.dumps(value, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def write_fixtures(path, header, cases, decodes):
    """Compact, one case per line, so that diffs stay readable."""
    def lines(items):
        return ",\n".join(json.dumps(item, ensure_ascii=False, separators=(",", ":")) for item in items)
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":"))[:-1]
    path.write_text(f'{head},\n"cases":[\n{lines(cases)}\n],\n"decode_cases":[\n{lines(decodes)}\n]}}\n',
                    encoding="utf-8")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "tests/data/tokenizers"))
    args = parser.parse_args()
    found = {"tokenizers": tokenizers.__version__, "sentencepiece": spm.__version__}
    if found != EXPECTED_VERSIONS:
        raise SystemExit(f"need {EXPECTED_VERSIONS}, found {found}")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # deterministic training order

    rng = random.Random(SEED)
    fortunes = load_fortunes()
    lines = corpus_lines(rng, fortunes)
    base_texts = fixed_texts() + random_texts(rng, fortunes)
    out = Path(args.out)

    builders = {"gpt2": build_gpt2, "llama3": build_llama3, "qwen2": build_qwen2, "llama2": build_llama2,
                "mistral": build_mistral, "digits": build_digits}
    for name, build in builders.items():
        tok, configs = build(lines)
        directory = out / name
        directory.mkdir(parents=True, exist_ok=True)
        tok.save(str(directory / "tokenizer.json"), pretty=False)
        for file_name, value in configs.items():
            write_json(directory / file_name, value)
        # Reload what was written so that the fixtures describe the committed file.
        tok = Tokenizer.from_file(str(directory / "tokenizer.json"))
        cases, decodes = hf_cases(tok, base_texts + SPECIAL_TEXTS[name], random.Random(f"{SEED}-{name}"))
        write_fixtures(directory / "fixtures.json", {"generator": f"tokenizers {tokenizers.__version__}",
                                                     "vocab_size": tok.get_vocab_size(with_added_tokens=True)},
                       cases, decodes)

    directory = out / "spm"
    directory.mkdir(parents=True, exist_ok=True)
    sp = build_spm_model(lines, directory)
    write_json(directory / "tokenizer_config.json", {"add_bos_token": True, "add_eos_token": False})
    cases, decodes = spm_cases(sp, base_texts, random.Random(f"{SEED}-spm"))
    write_fixtures(directory / "fixtures.json", {"generator": f"sentencepiece {spm.__version__}",
                                                 "vocab_size": sp.get_piece_size()}, cases, decodes)


if __name__ == "__main__":
    main()
