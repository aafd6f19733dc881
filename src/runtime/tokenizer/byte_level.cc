#include "runtime/tokenizer/byte_level.h"

#include <array>

#include "runtime/tokenizer/unicode.h"

namespace qlm::runtime::tok {
namespace {

bool stands_for_itself(unsigned b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

struct Alphabet {
  std::array<std::string, 256> encode;  // byte -> UTF-8 of its character
  std::array<int16_t, 512> decode{};    // code point (all are < 512) -> byte, or -1

  Alphabet() {
    decode.fill(-1);
    char32_t next_moved = 256;
    for (unsigned b = 0; b < 256; ++b) {
      const char32_t cp = stands_for_itself(b) ? b : next_moved++;
      append_utf8(encode[b], cp);
      decode[cp] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

}  // namespace

void append_byte_level(std::string_view bytes, std::string& out) {
  const Alphabet& a = alphabet();
  for (const char c : bytes) out += a.encode[static_cast<unsigned char>(c)];
}

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  append_byte_level(bytes, out);
  return out;
}

std::string_view byte_level_char(unsigned char byte) { return alphabet().encode[byte]; }

bool append_from_byte_level(std::string_view token, std::string& out) {
  const Alphabet& a = alphabet();
  const size_t original_size = out.size();
  size_t offset = 0;
  while (offset < token.size()) {
    const char32_t cp = next_codepoint(token, offset);
    if (cp >= a.decode.size() || a.decode[cp] < 0) {
      out.resize(original_size);
      return false;
    }
    out += static_cast<char>(a.decode[cp]);
  }
  return true;
}

}  // namespace qlm::runtime::tok
