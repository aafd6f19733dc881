// tokenizer.json text through HfTokenizer: the model, normalizer, pre-tokenizer (PCRE2 patterns), added tokens,
// post-processor and decoder sections it parses. A tokenizer that loads then encodes a few fixed texts, decodes the
// ids both ways, and looks up ids around and inside its vocabulary. Every rejection must be a qlm::Error; anything
// else (a crash, a sanitizer report, another exception type) is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "runtime/tokenizer/hf_tokenizer.h"

namespace {

using qlm::runtime::tok::HfTokenizer;

void exercise(const HfTokenizer& tok) {
  static constexpr std::string_view kTexts[5] = {
      "Hello, world! It's 2026-12-05, 12:30.",
      "  leading spaces\tand\ttabs\r\n\nnewlines   ",
      "ünïcödé 日本語 🙂 Ωμέγα",
      "<|im_start|>user\n<s>[INST] hi [/INST]</s><|endoftext|>",
      "",
  };
  for (std::string_view text : kTexts) {
    try {
      const std::vector<int32_t> ids = tok.encode(text, true);
      (void)tok.decode(ids, true);
      (void)tok.decode(ids, false);
      (void)tok.encode(text, false);
    } catch (const qlm::Error&) {
    }
  }
  const int64_t vocab = static_cast<int64_t>(std::min<size_t>(tok.vocab_size(), std::numeric_limits<int32_t>::max()));
  std::vector<int32_t> ids = {-1, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  for (int64_t id = 0; id < std::min<int64_t>(vocab, 512); ++id) ids.push_back(static_cast<int32_t>(id));
  for (int64_t id = std::max<int64_t>(0, vocab - 4); id <= vocab && id <= std::numeric_limits<int32_t>::max(); ++id)
    ids.push_back(static_cast<int32_t>(id));
  for (int32_t id : ids) {
    (void)tok.decode_token(id);
    (void)tok.is_special(id);
  }
  try {
    (void)tok.decode(ids, false);
  } catch (const qlm::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<HfTokenizer> tok;
  try {
    tok = HfTokenizer::from_json({reinterpret_cast<const char*>(data), size}, "fuzz.tokenizer.json");
  } catch (const qlm::Error&) {
    return 0;
  }
  exercise(*tok);
  return 0;
}
