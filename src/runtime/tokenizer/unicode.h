// UTF-8 and Unicode helpers for the tokenizer. Lossy repair follows Rust's String::from_utf8_lossy
// (one U+FFFD per maximal invalid subpart), which is what the reference `tokenizers` library uses.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace qlm::runtime::tok {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// One step of UTF-8 decoding at some offset.
struct Utf8Step {
  enum Kind { kValid, kInvalid, kTruncated } kind;
  size_t length;  // kValid: the sequence; kInvalid: the maximal invalid subpart (>= 1);
                  // kTruncated: a valid prefix of a sequence cut by the end of the input
};
Utf8Step utf8_step(std::string_view bytes, size_t offset);

// Decodes the valid sequence at `offset` (callers check validity first) and advances `offset`.
char32_t next_codepoint(std::string_view text, size_t& offset);
void append_utf8(std::string& out, char32_t code_point);

// Replaces every invalid or truncated sequence with U+FFFD.
std::string utf8_lossy(std::string_view bytes);
// Length of the longest prefix of `bytes` that does not end inside a truncated sequence: what a
// stream can emit now, leaving a possibly incomplete tail for later.
size_t utf8_emittable_prefix(std::string_view bytes);

bool is_ascii(std::string_view text);
bool is_whitespace(char32_t code_point);    // Unicode White_Space (Rust char::is_whitespace)
bool is_alphanumeric(char32_t code_point);  // Alphabetic or Numeric (Rust char::is_alphanumeric)
bool is_numeric(char32_t code_point);       // general category Nd, Nl or No (Rust char::is_numeric)

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };
std::string unicode_normalize(std::string_view text, NormalForm form);
std::string unicode_lowercase(std::string_view text);

}  // namespace qlm::runtime::tok
