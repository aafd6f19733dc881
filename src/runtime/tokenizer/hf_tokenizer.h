// A tokenizer.json pipeline: added tokens -> normalizer -> pre-tokenizer -> BPE -> post-processor,
// and back through the decoder.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/tokenizer/added_vocabulary.h"
#include "runtime/tokenizer/bpe_model.h"
#include "runtime/tokenizer/decoder.h"
#include "runtime/tokenizer/normalizer.h"
#include "runtime/tokenizer/post_processor.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/tokenizer.h"

namespace qlm::runtime::tok {

class HfTokenizer final : public Tokenizer {
 public:
  static std::unique_ptr<HfTokenizer> load(const std::filesystem::path& file);
  // The same from the file's text; `name` stands for the file in errors.
  static std::unique_ptr<HfTokenizer> from_json(std::string_view text, const std::string& name);

  std::string decode_token(int32_t id) const override;
  bool is_special(int32_t id) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  size_t vocab_size() const override;

 protected:
  std::vector<int32_t> do_encode(std::string_view text, bool add_special_tokens) const override;
  std::string do_decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  std::optional<int32_t> default_bos_id() const override { return post_processor_.leading_token(); }
  std::vector<int32_t> default_eos_ids() const override { return {}; }

 private:
  explicit HfTokenizer(const Field& root);
  // Pre-tokenizes normalized text and appends the BPE ids of its words.
  void encode_words(std::string text, bool at_start, std::vector<int32_t>& ids) const;
  // The vocabulary string of `id`, nullptr if unknown.
  const std::string* token_string(int32_t id) const;

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  AddedVocabulary added_;
  PostProcessor post_processor_;
  std::unique_ptr<Decoder> decoder_;
};

}  // namespace qlm::runtime::tok
