// tokenizer.json "added_tokens": special and non-special tokens that are cut out of the text
// before pre-tokenization, leftmost-longest, honouring lstrip/rstrip/single_word/normalized.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/tokenizer/json_fields.h"
#include "runtime/tokenizer/normalizer.h"
#include "runtime/tokenizer/string_map.h"

namespace qlm::runtime::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;       // the match absorbs whitespace on its left
  bool rstrip = false;       // the match absorbs whitespace on its right
  bool single_word = false;  // only matches when not touching a letter or digit
  bool normalized = false;   // matched in normalized text rather than raw text
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // `normalizer` (may be null) is applied to the content of normalized tokens.
  AddedVocabulary(const Field& added_tokens, const Normalizer* normalizer);

  struct Segment {
    size_t begin, end;  // bytes of the text
    int32_t id;         // the added token matched there, or -1 for text between tokens
  };
  // Cuts `text` at the tokens with normalized == `normalized_tokens`. Segments cover the text
  // except whitespace absorbed by lstrip/rstrip.
  std::vector<Segment> split(std::string_view text, bool normalized_tokens) const;

  const AddedToken* by_id(int32_t id) const;
  std::optional<int32_t> id_of(std::string_view content) const;
  bool has_normalized_tokens() const { return !normalized_.empty(); }
  int32_t max_id() const { return max_id_; }

 private:
  // Tokens indexed by first byte, longest first, so the first hit at a position is the longest.
  struct Matcher {
    std::array<std::vector<size_t>, 256> by_first_byte;  // indices into tokens_
    bool empty() const;
  };
  void add_to(Matcher& matcher, size_t index);

  std::vector<AddedToken> tokens_;
  std::vector<std::string> match_content_;  // per token: the content as matched (normalized if needed)
  std::unordered_map<int32_t, size_t> index_by_id_;
  StringMap<int32_t> id_by_content_;
  Matcher raw_, normalized_;
  int32_t max_id_ = -1;
};

}  // namespace qlm::runtime::tok
