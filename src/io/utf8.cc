#include "io/utf8.h"

#include <cstdint>

namespace qlm::io {

std::optional<size_t> first_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t lead = s[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    uint8_t second_min = 0x80, second_max = 0xBF;  // tighter bounds exclude overlongs and surrogates
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) second_min = 0xA0;
      if (lead == 0xED) second_max = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) second_min = 0x90;
      if (lead == 0xF4) second_max = 0x8F;
    } else {
      return i;
    }
    if (n - i < length) return i;
    if (s[i + 1] < second_min || s[i + 1] > second_max) return i;
    for (size_t k = 2; k < length; ++k)
      if ((s[i + k] & 0xC0) != 0x80) return i;
    i += length;
  }
  return std::nullopt;
}

}  // namespace qlm::io
