// A SentencePiece tokenizer.model (Llama-2, Mistral, Gemma ... without a tokenizer.json), through
// libsentencepiece. BOS/EOS are added per tokenizer_config.json add_bos_token / add_eos_token.
#pragma once

#include <filesystem>
#include <memory>

#include "runtime/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace qlm::runtime::tok {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  static std::unique_ptr<SentencePieceTokenizer> load(const std::filesystem::path& file, bool add_bos, bool add_eos);
  ~SentencePieceTokenizer() override;

  std::string decode_token(int32_t id) const override;
  bool is_special(int32_t id) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  size_t vocab_size() const override;

 protected:
  std::vector<int32_t> do_encode(std::string_view text, bool add_special_tokens) const override;
  std::string do_decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  std::optional<int32_t> default_bos_id() const override;
  std::vector<int32_t> default_eos_ids() const override;

 private:
  SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> processor, bool add_bos, bool add_eos);
  bool valid_id(int32_t id) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  bool add_bos_;
  bool add_eos_;
};

}  // namespace qlm::runtime::tok
