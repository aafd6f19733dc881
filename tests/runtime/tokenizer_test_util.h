// Small hand-written tokenizer.json documents for unit and error tests.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>

#include "runtime/tokenizer/tokenizer.h"
#include "support/temp_dir.h"

namespace qlm::runtime::testing {

// A BPE over "a", "b", "c" where "b c" outranks "a b", with no normalizer, pre-tokenizer,
// post-processor or decoder.
inline nlohmann::json tiny_bpe_json() {
  return nlohmann::json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
    "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
              "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5, " ": 6},
              "merges": ["b c", "a b", "a bc"]}})");
}

// Writes `doc` as tokenizer.json in `dir` and loads it.
inline std::unique_ptr<Tokenizer> load_json(const ::qlm::testing::TempDir& dir, const nlohmann::json& doc) {
  dir.write("tokenizer.json", doc.dump());
  return Tokenizer::from_model_dir(dir.path());
}

}  // namespace qlm::runtime::testing
