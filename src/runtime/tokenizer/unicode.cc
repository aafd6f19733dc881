#include "runtime/tokenizer/unicode.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "core/error.h"

namespace qlm::runtime::tok {

Utf8Step utf8_step(std::string_view bytes, size_t offset) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  const unsigned char lead = byte(offset);
  if (lead < 0x80) return {Utf8Step::kValid, 1};
  size_t need = 0;
  unsigned char second_lo = 0x80, second_hi = 0xBF;  // the second byte's range depends on the lead
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) second_lo = 0xA0;  // no overlong forms
    if (lead == 0xED) second_hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) second_lo = 0x90;
    if (lead == 0xF4) second_hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {Utf8Step::kInvalid, 1};
  }
  for (size_t i = 1; i <= need; ++i) {
    if (offset + i >= bytes.size()) return {Utf8Step::kTruncated, i};
    const unsigned char b = byte(offset + i);
    const unsigned char lo = i == 1 ? second_lo : 0x80;
    const unsigned char hi = i == 1 ? second_hi : 0xBF;
    if (b < lo || b > hi) return {Utf8Step::kInvalid, i};
  }
  return {Utf8Step::kValid, need + 1};
}

char32_t next_codepoint(std::string_view text, size_t& offset) {
  const auto byte = [&](size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(text[i])); };
  const char32_t lead = byte(offset);
  if (lead < 0x80) {
    offset += 1;
    return lead;
  }
  if (lead < 0xE0) {
    const char32_t cp = ((lead & 0x1F) << 6) | (byte(offset + 1) & 0x3F);
    offset += 2;
    return cp;
  }
  if (lead < 0xF0) {
    const char32_t cp = ((lead & 0x0F) << 12) | ((byte(offset + 1) & 0x3F) << 6) | (byte(offset + 2) & 0x3F);
    offset += 3;
    return cp;
  }
  const char32_t cp = ((lead & 0x07) << 18) | ((byte(offset + 1) & 0x3F) << 12) |
                      ((byte(offset + 2) & 0x3F) << 6) | (byte(offset + 3) & 0x3F);
  offset += 4;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t offset = 0;
  while (offset < bytes.size()) {
    const Utf8Step step = utf8_step(bytes, offset);
    if (step.kind == Utf8Step::kValid)
      out.append(bytes.substr(offset, step.length));
    else
      out.append(kReplacementChar);
    offset += step.length;
  }
  return out;
}

size_t utf8_emittable_prefix(std::string_view bytes) {
  size_t offset = 0;
  while (offset < bytes.size()) {
    const Utf8Step step = utf8_step(bytes, offset);
    if (step.kind == Utf8Step::kTruncated) return offset;
    offset += step.length;
  }
  return offset;
}

bool is_ascii(std::string_view text) {
  for (const char c : text)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

bool is_whitespace(char32_t cp) { return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_WHITE_SPACE); }

bool is_numeric(char32_t cp) {
  const int8_t type = u_charType(static_cast<UChar32>(cp));
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

bool is_alphanumeric(char32_t cp) { return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_ALPHABETIC) || is_numeric(cp); }

namespace {

const icu::Normalizer2& normalizer_for(NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = nullptr;
  switch (form) {
    case NormalForm::kNFC: normalizer = icu::Normalizer2::getNFCInstance(status); break;
    case NormalForm::kNFD: normalizer = icu::Normalizer2::getNFDInstance(status); break;
    case NormalForm::kNFKC: normalizer = icu::Normalizer2::getNFKCInstance(status); break;
    case NormalForm::kNFKD: normalizer = icu::Normalizer2::getNFKDInstance(status); break;
  }
  if (U_FAILURE(status) || normalizer == nullptr)
    fail("tokenizer.icu", {}, "check the ICU installation (libicu)", "ICU normalizer unavailable: {}",
         u_errorName(status));
  return *normalizer;
}

}  // namespace

std::string unicode_normalize(std::string_view text, NormalForm form) {
  if (is_ascii(text)) return std::string(text);  // ASCII is invariant under every normal form
  const icu::Normalizer2& normalizer = normalizer_for(form);
  const icu::UnicodeString input = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  UErrorCode status = U_ZERO_ERROR;
  if (normalizer.isNormalized(input, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  const icu::UnicodeString result = normalizer.normalize(input, status);
  if (U_FAILURE(status)) fail("tokenizer.icu", {}, "", "Unicode normalization failed: {}", u_errorName(status));
  std::string out;
  result.toUTF8String(out);
  return out;
}

std::string unicode_lowercase(std::string_view text) {
  icu::UnicodeString value = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  value.toLower(icu::Locale::getRoot());
  std::string out;
  value.toUTF8String(out);
  return out;
}

}  // namespace qlm::runtime::tok
