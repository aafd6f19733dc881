// Text <-> token ids for a Hugging Face model directory: tokenizer.json (byte-level BPE such as
// GPT-2, Llama-3, Qwen2/3, Mistral-Nemo; SentencePiece-style BPE with byte fallback such as
// Llama-2 and Mistral) or, when there is none, a SentencePiece tokenizer.model.
//
// Errors are qlm::Error with codes "tokenizer.*" naming the file and the field:
//   tokenizer.missing      no tokenizer.json / tokenizer.model in the directory
//   tokenizer.read         the file cannot be read
//   tokenizer.parse        tokenizer.json is not JSON
//   tokenizer.field        a field is missing or of the wrong type
//   tokenizer.unsupported  a model/normalizer/pre-tokenizer/decoder type qlm does not implement
//   tokenizer.vocab, tokenizer.merges, tokenizer.regex   inconsistent model data
//   tokenizer.sentencepiece  tokenizer.model rejected by SentencePiece
//   tokenizer.input        text to encode is not valid UTF-8
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qlm::runtime {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Loads `dir`/tokenizer.json, else `dir`/tokenizer.model (a path to either file also works),
  // and the BOS/EOS ids from generation_config.json, config.json and tokenizer_config.json.
  static std::unique_ptr<Tokenizer> from_model_dir(const std::filesystem::path& dir);

  // With `add_special_tokens`, the post-processor template (e.g. BOS) is applied. Added tokens
  // written in the text ("<|im_start|>") are always recognised, as in the reference library.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const {
    return do_encode(text, add_special_tokens);
  }
  // Ids outside the vocabulary are skipped. Invalid UTF-8 is replaced by U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = true) const {
    return do_decode(ids, skip_special_tokens);
  }
  // The bytes one token contributes in the middle of a text (no sequence-start space removal);
  // may be part of a UTF-8 sequence. Empty for an id outside the vocabulary.
  virtual std::string decode_token(int32_t id) const = 0;
  virtual bool is_special(int32_t id) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;

  int32_t bos_id() const { return bos_id_; }  // -1 when the model has none
  std::vector<int32_t> eos_ids() const { return eos_ids_; }
  // One more than the largest token id (added tokens included).
  virtual size_t vocab_size() const = 0;

 protected:
  virtual std::vector<int32_t> do_encode(std::string_view text, bool add_special_tokens) const = 0;
  virtual std::string do_decode(std::span<const int32_t> ids, bool skip_special_tokens) const = 0;
  // What the tokenizer file itself says, used when no config file does.
  virtual std::optional<int32_t> default_bos_id() const = 0;
  virtual std::vector<int32_t> default_eos_ids() const = 0;

 private:
  int32_t bos_id_ = -1;
  std::vector<int32_t> eos_ids_;
  friend class SpecialIdsLoader;
};

// Turns a stream of ids into text pieces that are always complete UTF-8: bytes of a character
// split across tokens are held back until the character is complete.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = true)
      : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}
  // Text that became complete with `id` (possibly empty).
  std::string push(int32_t id);
  // Whatever is held back, with an incomplete sequence replaced by U+FFFD.
  std::string finish();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
};

}  // namespace qlm::runtime
