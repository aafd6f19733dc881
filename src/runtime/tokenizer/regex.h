// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) with the semantics the
// pre-tokenizer patterns of Hugging Face tokenizers need: \p{L}, \p{N}, (?i:...), lookahead.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pcre2_real_code_8;

namespace qlm::runtime::tok {

class Regex {
 public:
  // Throws "tokenizer.regex" naming `where` (file and field) if the pattern does not compile.
  Regex(std::string_view pattern, const std::string& file, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Byte ranges [begin, end) of the successive non-overlapping matches in `text`, which must be
  // valid UTF-8. An empty match moves the search on by one character.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  pcre2_real_code_8* code_ = nullptr;
};

}  // namespace qlm::runtime::tok
