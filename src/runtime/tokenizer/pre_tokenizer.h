// tokenizer.json "pre_tokenizer": ByteLevel, Split, Metaspace, Digits and Sequence. Pre-tokenizers cut
// normalized text into words; BPE never merges across words.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/tokenizer/json_fields.h"

namespace qlm::runtime::tok {

struct Piece {
  std::string text;
  bool at_start = false;  // begins at offset 0 of the input text (Metaspace prepend_scheme "first")
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` with their splits; empty pieces are dropped.
  virtual void split(std::vector<Piece>& pieces) const = 0;
};

// nullptr for a null field.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Field& field);

// How Split keeps the delimiters it finds (Hugging Face SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Cuts [0, size) at `matches` (sorted, non-overlapping) and returns the pieces to keep.
std::vector<std::pair<size_t, size_t>> split_ranges(size_t size, const std::vector<std::pair<size_t, size_t>>& matches,
                                                    SplitBehavior behavior, bool invert);

}  // namespace qlm::runtime::tok
