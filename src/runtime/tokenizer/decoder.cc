#include "runtime/tokenizer/decoder.h"

#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/pattern.h"
#include "runtime/tokenizer/unicode.h"

namespace qlm::runtime::tok {
namespace {

// All tokens concatenated into one byte string, each mapped back from the byte-level alphabet
// (a token with a character outside it, such as an added token with a space, is kept as is).
class ByteLevel final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, DecodeState& state) const override {
    std::string bytes;
    for (const std::string& token : tokens)
      if (!append_from_byte_level(token, bytes)) bytes += token;
    tokens.assign(1, state.raw_bytes ? std::move(bytes) : utf8_lossy(bytes));
  }
};

// "<0xXX>" tokens become their byte; a run of them that is not valid UTF-8 becomes one U+FFFD
// per byte.
class ByteFallback final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, DecodeState& state) const override {
    std::vector<std::string> out;
    std::string pending;
    size_t pending_count = 0;
    const auto flush = [&] {
      if (pending_count == 0) return;
      if (state.raw_bytes || utf8_lossy(pending) == pending) {
        out.push_back(std::move(pending));
      } else {
        std::string replacement;
        for (size_t i = 0; i < pending_count; ++i) replacement += kReplacementChar;
        out.push_back(std::move(replacement));
      }
      pending.clear();
      pending_count = 0;
    };
    for (std::string& token : tokens) {
      if (const int byte = byte_token_value(token); byte >= 0) {
        pending += static_cast<char>(byte);
        ++pending_count;
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // The byte of a "<0xXX>" token, or -1.
  static int byte_token_value(const std::string& token) {
    if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return -1;
    const int high = hex_digit(token[3]), low = hex_digit(token[4]);
    return high < 0 || low < 0 ? -1 : high * 16 + low;
  }
};

class Fuse final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, DecodeState& state) const override {
    std::string all;
    for (const std::string& token : tokens) all += token;
    tokens.assign(1, std::move(all));
    state.fused = true;
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class Strip final : public Decoder {
 public:
  explicit Strip(const Field& field)
      : content_(field.string_at("content")), start_(field.int_or("start", 0)), stop_(field.int_or("stop", 0)) {
    size_t offset = 0;
    if (content_.empty() || (next_codepoint(content_, offset), offset != content_.size()))
      field.at("content").fail_value("expected exactly one character");
  }
  void decode_chain(std::vector<std::string>& tokens, DecodeState& state) const override {
    if (state.fused && !state.sequence_start) return;  // the fused text is a continuation
    for (std::string& token : tokens) {
      size_t begin = 0, end = token.size();
      for (int64_t i = 0; i < start_ && token.compare(begin, content_.size(), content_) == 0 && begin < end; ++i)
        begin += content_.size();
      for (int64_t i = 0; i < stop_ && end - begin >= content_.size() &&
                          token.compare(end - content_.size(), content_.size(), content_) == 0;
           ++i)
        end -= content_.size();
      token = token.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  int64_t start_, stop_;
};

class Replace final : public Decoder {
 public:
  explicit Replace(const Field& field) : pattern_(field.at("pattern")), content_(field.string_at("content")) {}
  void decode_chain(std::vector<std::string>& tokens, DecodeState&) const override {
    for (std::string& token : tokens) token = pattern_.replace_all(token, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// The replacement character becomes a space, except in the first token of the text, where it
// was the prepended prefix and is dropped.
class Metaspace final : public Decoder {
 public:
  explicit Metaspace(const Field& field) : replacement_(field.string_at("replacement")) {
    if (field.has("prepend_scheme")) prepend_ = field.string_at("prepend_scheme") != "never";
    else prepend_ = field.bool_or("add_prefix_space", true);
  }
  void decode_chain(std::vector<std::string>& tokens, DecodeState& state) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const bool drop = i == 0 && prepend_ && state.sequence_start;
      std::string out;
      const std::string& token = tokens[i];
      for (size_t at = 0; at < token.size();) {
        if (token.compare(at, replacement_.size(), replacement_) == 0) {
          if (!drop) out += ' ';
          at += replacement_.size();
        } else {
          out += token[at++];
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool prepend_ = true;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens, DecodeState& state) const override {
    for (const auto& step : steps_) step->decode_chain(tokens, state);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Field& field) {
  if (field.is_null()) return nullptr;
  const std::string type = field.type_name();
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip") return std::make_unique<Strip>(field);
  if (type == "Replace") return std::make_unique<Replace>(field);
  if (type == "Metaspace") return std::make_unique<Metaspace>(field);
  if (type == "Sequence") {
    const Field list = field.at("decoders");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < list.size(); ++i)
      if (auto step = make_decoder(list.at(i))) steps.push_back(std::move(step));
    return std::make_unique<Sequence>(std::move(steps));
  }
  field.fail_unsupported("decoder type \"" + type + "\"");
}

}  // namespace qlm::runtime::tok
