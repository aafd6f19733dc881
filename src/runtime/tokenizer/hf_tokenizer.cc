#include "runtime/tokenizer/hf_tokenizer.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/utf8.h"

namespace qlm::runtime::tok {
namespace {

constexpr uintmax_t kMaxTokenizerJsonBytes = uintmax_t{512} << 20;

std::string read_file(const std::filesystem::path& file) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec)
    fail("tokenizer.read", ErrorContext{file.string(), "", ""}, "check that the file exists and is readable",
         "cannot read tokenizer file: {}", ec.message());
  if (size > kMaxTokenizerJsonBytes)
    fail("tokenizer.read", ErrorContext{file.string(), "", ""}, "",
         "tokenizer file is {} bytes, more than the {} allowed", size, kMaxTokenizerJsonBytes);
  std::ifstream in(file, std::ios::binary);
  std::string text(size, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(size)))
    fail("tokenizer.read", ErrorContext{file.string(), "", ""}, "", "cannot read tokenizer file");
  return text;
}

}  // namespace

std::unique_ptr<HfTokenizer> HfTokenizer::load(const std::filesystem::path& file) {
  return from_json(read_file(file), file.string());
}

std::unique_ptr<HfTokenizer> HfTokenizer::from_json(std::string_view text, const std::string& name) {
  constexpr const char* kRemedy = "the file is not valid JSON; re-download it";
  // nlohmann's lexer takes a NUL byte for the end of the input: "{...}\0rest" would load the part before it.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    fail("tokenizer.parse", ErrorContext{name, "", ""}, kRemedy, "invalid JSON at byte {}: a NUL byte", nul + 1);
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::parse_error& e) {
    fail("tokenizer.parse", ErrorContext{name, "", ""}, kRemedy, "invalid JSON at byte {}: {}", e.byte, e.what());
  } catch (const Json::exception& e) {  // out_of_range 406: a number beyond the double range, e.g. 1e400
    fail("tokenizer.parse", ErrorContext{name, "", ""}, kRemedy, "invalid JSON: {}", e.what());
  }
  return std::unique_ptr<HfTokenizer>(new HfTokenizer(Field(doc, name, "")));
}

HfTokenizer::HfTokenizer(const Field& root) {
  root.require_object();
  model_ = std::make_unique<BpeModel>(root.at("model"));
  normalizer_ = root.has("normalizer") ? make_normalizer(root.at("normalizer")) : nullptr;
  pre_tokenizer_ = root.has("pre_tokenizer") ? make_pre_tokenizer(root.at("pre_tokenizer")) : nullptr;
  if (root.has("added_tokens")) added_ = AddedVocabulary(root.at("added_tokens"), normalizer_.get());
  if (root.has("post_processor")) post_processor_ = PostProcessor(root.at("post_processor"));
  decoder_ = root.has("decoder") ? make_decoder(root.at("decoder")) : nullptr;
}

std::vector<int32_t> HfTokenizer::do_encode(std::string_view text, bool add_special_tokens) const {
  if (const auto bad = io::first_invalid_utf8(text))
    fail("tokenizer.input", {}, "pass UTF-8 text", "text to encode is not valid UTF-8 (byte {})", *bad);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const auto& segment : added_.split(text, false)) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    std::string piece(text.substr(segment.begin, segment.end - segment.begin));
    const bool at_start = segment.begin == 0;
    if (normalizer_) normalizer_->normalize(piece);
    if (!added_.has_normalized_tokens()) {
      encode_words(std::move(piece), at_start, ids);
      continue;
    }
    for (const auto& inner : added_.split(piece, true)) {
      if (inner.id >= 0)
        ids.push_back(inner.id);
      else
        encode_words(piece.substr(inner.begin, inner.end - inner.begin), at_start && inner.begin == 0, ids);
    }
  }
  return add_special_tokens ? post_processor_.apply(std::move(ids)) : ids;
}

void HfTokenizer::encode_words(std::string text, bool at_start, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  std::vector<Piece> pieces;
  pieces.push_back(Piece{std::move(text), at_start});
  if (pre_tokenizer_) pre_tokenizer_->split(pieces);
  for (const Piece& piece : pieces) model_->tokenize(piece.text, ids);
}

const std::string* HfTokenizer::token_string(int32_t id) const {
  if (const AddedToken* added = added_.by_id(id)) return &added->content;
  return model_->id_to_token(id);
}

std::string HfTokenizer::do_decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (skip_special_tokens && is_special(id)) continue;
    if (const std::string* token = token_string(id)) tokens.push_back(*token);
  }
  std::string out;
  if (!decoder_) {
    // The reference joins undecoded tokens with spaces.
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  DecodeState state;
  decoder_->decode_chain(tokens, state);
  for (const std::string& token : tokens) out += token;
  return out;
}

std::string HfTokenizer::decode_token(int32_t id) const {
  const std::string* token = token_string(id);
  if (token == nullptr) return {};
  if (!decoder_) return *token;
  std::vector<std::string> tokens{*token};
  DecodeState state;
  state.sequence_start = false;
  state.raw_bytes = true;
  decoder_->decode_chain(tokens, state);
  std::string out;
  for (const std::string& piece : tokens) out += piece;
  return out;
}

bool HfTokenizer::is_special(int32_t id) const {
  const AddedToken* added = added_.by_id(id);
  return added != nullptr && added->special;
}

std::optional<int32_t> HfTokenizer::token_to_id(std::string_view token) const {
  if (const auto id = added_.id_of(token)) return id;
  return model_->token_to_id(token);
}

size_t HfTokenizer::vocab_size() const {
  return std::max(model_->vocab_size(), static_cast<size_t>(added_.max_id() + 1));
}

}  // namespace qlm::runtime::tok
