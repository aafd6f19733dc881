// tokenizer.json "post_processor": the special tokens wrapped around an encoded single sequence
// (TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel, Sequence).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/tokenizer/json_fields.h"

namespace qlm::runtime::tok {

class PostProcessor {
 public:
  PostProcessor() = default;
  // A null field gives a processor that adds nothing.
  explicit PostProcessor(const Field& field);

  // `ids` wrapped in the single-sequence template.
  std::vector<int32_t> apply(std::vector<int32_t> ids) const;
  // The first token the template puts before the text (the BOS of Llama-style templates).
  std::optional<int32_t> leading_token() const;

 private:
  void load(const Field& field);
  std::vector<int32_t> prefix_;
  std::vector<int32_t> suffix_;
};

}  // namespace qlm::runtime::tok
