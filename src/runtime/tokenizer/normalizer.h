// tokenizer.json "normalizer": NFC/NFD/NFKC/NFKD, Lowercase, Prepend, Replace, Strip and Sequence.
// Any other type is rejected at load time with "tokenizer.unsupported".
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "runtime/tokenizer/json_fields.h"

namespace qlm::runtime::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// nullptr for a null field.
std::unique_ptr<Normalizer> make_normalizer(const Field& field);

}  // namespace qlm::runtime::tok
