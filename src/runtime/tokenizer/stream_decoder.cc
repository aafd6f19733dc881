#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/unicode.h"

namespace qlm::runtime {

std::string StreamDecoder::push(int32_t id) {
  if (skip_special_tokens_ && tokenizer_->is_special(id)) return {};
  pending_ += tokenizer_->decode_token(id);
  const size_t ready = tok::utf8_emittable_prefix(pending_);
  std::string out = tok::utf8_lossy(std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out = tok::utf8_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace qlm::runtime
