#!/usr/bin/env python3
"""Writes the libFuzzer seed corpora under fuzz/corpus/<target>/ (standard library only).

The seeds cover the container and sharding items of the bad-input corpus (RELIABILITY.md B.5) plus
a few valid files, so the fuzzer starts from every interesting branch. Seeds stay small: large
inputs (100 MB headers) are represented by their length fields only.
"""
import json
import pathlib
import shutil
import struct

ROOT = pathlib.Path(__file__).resolve().parent.parent / "fuzz" / "corpus"


def st(header, data=b"", length=None):
    """8-byte little-endian length + header + data."""
    if isinstance(header, str):
        header = header.encode("utf-8")
    return struct.pack("<Q", len(header) if length is None else length) + header + data


def entry(name, dtype="F32", shape="[2]", offsets="[0,8]"):
    return f'"{name}":{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}}}'


def obj(*members):
    return "{" + ",".join(members) + "}"


def safetensors_seeds():
    z8 = bytes(8)
    seeds = {
        # valid
        "valid_f32": st(obj(entry("w")), z8),
        "valid_padded": st(" \t" + obj(entry("w")) + "  ", z8),
        "valid_metadata": st(obj('"__metadata__":{"format":"pt"}', entry("w")), z8),
        "valid_scalar_empty": st(obj(entry("s", "F32", "[]", "[0,4]"), entry("e", "BF16", "[0,3]", "[4,4]")), bytes(4)),
        "valid_f4_f6": st(obj(entry("a", "F4", "[4]", "[0,2]"), entry("b", "F6_E2M3", "[4]", "[2,5]")), bytes(5)),
        "valid_misaligned": st(obj(entry("a", "F64", "[1]", "[0,8]"), entry("b", "I32", "[1]", "[8,12]")), bytes(12)),
        # 1
        "empty": b"",
        "tiny": b"\x01\x02\x03",
        # 2
        "n_zero": st(""),
        "n_one_brace": st("{"),
        "n_past_eof": st("{}", length=1000),
        "n_max": st("{}", length=2**64 - 1),
        "n_limit_plus_one": st("{}", length=100_000_001),
        # 3
        "not_utf8": st(b'{"\xff":1}'),
        "array_top": st("[]"),
        "string_top": st('"x"'),
        "number_top": st("42"),
        "leading_garbage": st("x{}"),
        "nul_bytes": st(b"{}\x00\x00\x00\x00\x00\x00"),
        "depth_bomb": st('{"__metadata__":{"x":' + "[" * 200 + "]" * 200 + "}}"),
        # 4
        "metadata_non_string": st('{"__metadata__":{"n":1}}'),
        "metadata_as_tensor": st(obj(entry("__metadata__")), z8),
        # 5
        "missing_dtype": st('{"w":{"shape":[2],"data_offsets":[0,8]}}', z8),
        "extra_strides": st('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"strides":[1]}}', z8),
        "entry_not_object": st('{"w":[1]}'),
        # 6
        "dtype_f128": st(obj(entry("w", "F128")), z8),
        "dtype_lower": st(obj(entry("w", "f16")), z8),
        "dtype_number": st('{"w":{"dtype":16,"shape":[2],"data_offsets":[0,8]}}', z8),
        # 7
        "shape_negative": st(obj(entry("w", shape="[-2]")), z8),
        "shape_float": st(obj(entry("w", shape="[1.0,2]")), z8),
        "shape_exp": st(obj(entry("w", shape="[1e3]")), z8),
        "shape_2pow48": st(obj(entry("w", shape="[281474976710656]")), z8),
        "shape_string": st(obj(entry("w", shape='["2"]')), z8),
        "shape_nested": st(obj(entry("w", shape="[[2]]")), z8),
        "shape_overflow": st(obj(entry("w", shape="[281474976710655,281474976710655]")), z8),
        "bits_overflow": st(obj(entry("w", "F64", "[281474976710655,32768]")), z8),
        # 8
        "f4_odd": st(obj(entry("w", "F4", "[3]", "[0,2]")), bytes(2)),
        "f6_not_mult4": st(obj(entry("w", "F6_E3M2", "[2]", "[0,2]")), bytes(2)),
        # 9
        "offsets_reversed": st(obj(entry("w", offsets="[8,0]")), z8),
        "offsets_short": st(obj(entry("w", offsets="[0,4]")), bytes(4)),
        "offsets_long": st(obj(entry("w", offsets="[0,12]")), bytes(12)),
        "offsets_len1": st(obj(entry("w", offsets="[8]")), z8),
        "offsets_len3": st(obj(entry("w", offsets="[0,4,8]")), z8),
        "offsets_negative": st(obj(entry("w", offsets="[-8,0]")), z8),
        "offsets_float": st(obj(entry("w", offsets="[0.0,8.0]")), z8),
        # 10
        "first_not_zero": st(obj(entry("w", offsets="[4,12]")), bytes(12)),
        "gap": st(obj(entry("a", offsets="[0,8]"), entry("b", offsets="[12,20]")), bytes(20)),
        "overlap": st(obj(entry("a", offsets="[0,8]"), entry("b", shape="[3]", offsets="[4,16]")), bytes(16)),
        "alias": st(obj(entry("a"), entry("b")), z8),
        "alias_many": st(obj(*[entry(f"t{i}") for i in range(64)]), z8),
        # 11
        "truncated": st(obj(entry("w", shape="[1024]", offsets="[0,4096]")), bytes(100)),
        "trailing": st(obj(entry("w")), z8 + b"extra_bogus_data_for_polyglot_file"),
        "zip_appended": st(obj(entry("w")), z8 + b"PK\x03\x04\x14\x00\x00\x00"),
        "pickle_appended": st(obj(entry("w")), z8 + b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94."),
        # 12
        "duplicate_name": st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', z8),
        "duplicate_escaped": st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"\\u0061":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', z8),
        "odd_names": st(obj(entry("", shape="[1]", offsets="[0,4]"), entry("../../x", shape="[1]", offsets="[4,8]")), z8),
        "invalid_escape": st(obj(entry("bad\\x")), z8),
        "lone_surrogate": st(obj(entry("\\ud800")), z8),
    }
    return {name + ".safetensors": data for name, data in seeds.items()}


def index_seeds():
    def idx(weight_map, metadata='{"total_size": 16}'):
        return ('{"metadata": ' + metadata + ', "weight_map": ' + weight_map + "}").encode()

    return {
        "valid.json": idx('{"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}'),
        "dotdot.json": idx('{"a": "../x.safetensors"}'),
        "absolute.json": idx('{"a": "/etc/x.safetensors"}'),
        "backslash.json": idx('{"a": "sub\\\\x.safetensors"}'),
        "empty_name.json": idx('{"a": ""}'),
        "weight_map_array.json": idx('["a"]'),
        "weight_map_missing.json": b'{"metadata": {}}',
        "value_not_string.json": idx('{"a": 1}'),
        "duplicate_tensor.json": idx('{"a": "s1.safetensors", "a": "s2.safetensors"}'),
        "total_size_string.json": idx('{"a": "s.safetensors"}', '{"total_size": "16"}'),
        "metadata_array.json": idx("{}", "[1]"),
        "depth_bomb.json": ('{"metadata": ' + "[" * 200 + "]" * 200 + ', "weight_map": {}}').encode(),
        "not_utf8.json": b'{"weight_map": {"a": "\xff"}}',
        "truncated.json": b'{"weight_map": {"a": "s.safe',
    }


def config_seeds():
    gptq = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
            "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}}
    return {
        "gptq.json": json.dumps(gptq).encode(),
        "bits_string.json": b'{"quantization_config": {"quant_method": "gptq", "bits": "4"}}',
        "bits_float.json": b'{"quantization_config": {"quant_method": "gptq", "bits": 4.0}}',
        "duplicate_key.json": b'{"bits": 4, "bits": 8}',
        "nested_duplicate.json": b'{"q": {"a": 1, "a": 2}}',
        "depth_bomb.json": b"[" * 200 + b"]" * 200,
        "trailing.json": b'{"a": 1} x',
        "comment.json": b'{"a": 1 /* c */}',
        "big_number.json": b'{"a": 1e400, "b": 18446744073709551616, "c": -9223372036854775809}',
        "escapes.json": b'{"a": "\\ud83d\\ude00 \\u0000 \\ud800"}',
        "not_utf8.json": b'{"a": "\xc0\x80"}',
    }


def tokenizer_seeds():
    """The tokenizer.json fixtures written by the tokenizers library (tests/data/tokenizers, 11-26 KB: byte-level BPE
    of GPT-2, Llama-3 and Qwen2, SentencePiece-style BPE with byte fallback of Llama-2 and Mistral, digit splitting),
    plus small broken variants: a wrong model type, merges naming unknown tokens, a pattern that does not compile,
    an added token past the vocabulary, and a normalizer sequence nested in itself."""
    fixtures = ROOT.parent.parent / "tests" / "data" / "tokenizers"
    seeds = {f"{d.name}.json": (d / "tokenizer.json").read_bytes()
             for d in sorted(fixtures.iterdir()) if (d / "tokenizer.json").is_file()}
    vocab = {"a": 0, "b": 1, "ab": 2, "\u0120": 3}
    base = {"model": {"type": "BPE", "vocab": vocab, "merges": ["a b"]}}
    seeds["tiny.json"] = json.dumps(base).encode()
    seeds["wrong_model.json"] = json.dumps({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}).encode()
    seeds["unknown_merge.json"] = json.dumps({"model": {"type": "BPE", "vocab": vocab, "merges": ["x y"]}}).encode()
    seeds["bad_pattern.json"] = json.dumps(dict(base, pre_tokenizer={
        "type": "Split", "pattern": {"Regex": "(?<!"}, "behavior": "Isolated", "invert": False})).encode()
    seeds["added_past_vocab.json"] = json.dumps(dict(base, added_tokens=[
        {"id": 2147483647, "content": "<x>", "special": True, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False}])).encode()
    seeds["nested_normalizers.json"] = json.dumps(dict(base, normalizer={
        "type": "Sequence", "normalizers": [{"type": "Sequence", "normalizers": [{"type": "NFC"}]}]})).encode()
    return seeds


def main():
    for target, seeds in (("fuzz_safetensors", safetensors_seeds()), ("fuzz_index", index_seeds()),
                          ("fuzz_config", config_seeds()), ("fuzz_tokenizer", tokenizer_seeds())):
        directory = ROOT / target
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        for name, data in seeds.items():
            (directory / name).write_bytes(data)
        print(f"{target}: {len(seeds)} seeds in {directory}")


if __name__ == "__main__":
    main()
