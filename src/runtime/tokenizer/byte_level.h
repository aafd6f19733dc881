// The GPT-2 byte-level alphabet: each of the 256 byte values is shown as one printable code point
// (printable Latin-1 bytes stand for themselves, the others are moved to U+0100 and up), so any
// byte string becomes a string of vocabulary characters and back.
#pragma once

#include <string>
#include <string_view>

namespace qlm::runtime::tok {

// Appends the byte-level characters (UTF-8) for `bytes` to `out`.
void append_byte_level(std::string_view bytes, std::string& out);
std::string to_byte_level(std::string_view bytes);
// The UTF-8 of the character standing for `byte`.
std::string_view byte_level_char(unsigned char byte);
// Appends the bytes that `token` stands for; false (and `out` unchanged) when some character of
// `token` is not in the alphabet. `token` must be valid UTF-8.
bool append_from_byte_level(std::string_view token, std::string& out);

}  // namespace qlm::runtime::tok
