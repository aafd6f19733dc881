// The {"String": ...} / {"Regex": ...} patterns of Split, Replace and their decoders.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/tokenizer/json_fields.h"
#include "runtime/tokenizer/regex.h"

namespace qlm::runtime::tok {

class Pattern {
 public:
  explicit Pattern(const Field& field);
  // Byte ranges of the non-overlapping matches, left to right.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  // `text` with every match replaced by `content`.
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;  // set for {"Regex": ...}
};

}  // namespace qlm::runtime::tok
