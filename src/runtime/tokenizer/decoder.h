// tokenizer.json "decoder": turns token strings back into text (ByteLevel, ByteFallback, Fuse,
// Strip, Replace, Metaspace, Sequence), following Hugging Face decode_chain step by step.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/tokenizer/json_fields.h"

namespace qlm::runtime::tok {

struct DecodeState {
  // The tokens start the decoded text: Metaspace drops the prefix space of the first token, and a
  // Strip after a Fuse (Llama-2's leading-space removal) applies. False when streaming.
  bool sequence_start = true;
  // Keep invalid UTF-8 bytes as they are instead of replacing them with U+FFFD (streaming, where
  // a character can be split across tokens).
  bool raw_bytes = false;
  bool fused = false;  // a Fuse step has run
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens, DecodeState& state) const = 0;
};

// nullptr for a null field.
std::unique_ptr<Decoder> make_decoder(const Field& field);

}  // namespace qlm::runtime::tok
