#include "runtime/tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "core/error.h"
#include "io/utf8.h"
#include "runtime/tokenizer/unicode.h"

namespace qlm::runtime::tok {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

void check_status(const sentencepiece::util::Status& status, std::string_view what) {
  if (!status.ok())
    fail("tokenizer.sentencepiece", {}, "", "SentencePiece {} failed: {}", what, status.ToString());
}

}  // namespace

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::load(const std::filesystem::path& file, bool add_bos,
                                                                     bool add_eos) {
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = processor->Load(file.string());
  if (!status.ok())
    fail("tokenizer.sentencepiece", ErrorContext{file.string(), "", ""}, "the file must be a SentencePiece model",
         "cannot load SentencePiece model: {}", status.ToString());
  return std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(processor), add_bos, add_eos));
}

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> processor,
                                               bool add_bos, bool add_eos)
    : processor_(std::move(processor)), add_bos_(add_bos), add_eos_(add_eos) {}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

bool SentencePieceTokenizer::valid_id(int32_t id) const { return id >= 0 && id < processor_->GetPieceSize(); }

std::vector<int32_t> SentencePieceTokenizer::do_encode(std::string_view text, bool add_special_tokens) const {
  if (const auto bad = io::first_invalid_utf8(text))
    fail("tokenizer.input", {}, "pass UTF-8 text", "text to encode is not valid UTF-8 (byte {})", *bad);
  std::vector<int> pieces;
  check_status(processor_->Encode(text, &pieces), "encoding");
  std::vector<int32_t> ids;
  ids.reserve(pieces.size() + 2);
  if (add_special_tokens && add_bos_ && processor_->bos_id() >= 0) ids.push_back(processor_->bos_id());
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  if (add_special_tokens && add_eos_ && processor_->eos_id() >= 0) ids.push_back(processor_->eos_id());
  return ids;
}

std::string SentencePieceTokenizer::do_decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  // Runs of ordinary pieces go through SentencePiece (which drops control tokens); when special
  // tokens are kept they are written as their piece text between the runs.
  std::string out;
  std::vector<int> run;
  const auto flush = [&] {
    if (run.empty()) return;
    std::string text;
    check_status(processor_->Decode(run, &text), "decoding");
    out += text;
    run.clear();
  };
  for (const int32_t id : ids) {
    if (!valid_id(id)) continue;
    if (!skip_special_tokens && processor_->IsControl(id)) {
      flush();
      out += processor_->IdToPiece(id);
      continue;
    }
    run.push_back(id);
  }
  flush();
  return out;
}

std::string SentencePieceTokenizer::decode_token(int32_t id) const {
  if (!valid_id(id)) return {};
  const std::string piece = processor_->IdToPiece(id);
  if (processor_->IsByte(id)) return std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
  if (processor_->IsControl(id)) return piece;
  if (processor_->IsUnknown(id)) return " \xE2\x81\x87 ";  // " ⁇ ", how SentencePiece shows <unk>
  std::string out;
  for (size_t at = 0; at < piece.size();) {
    if (piece.compare(at, kSpaceMarker.size(), kSpaceMarker) == 0) {
      out += ' ';
      at += kSpaceMarker.size();
    } else {
      out += piece[at++];
    }
  }
  return out;
}

bool SentencePieceTokenizer::is_special(int32_t id) const { return valid_id(id) && processor_->IsControl(id); }

std::optional<int32_t> SentencePieceTokenizer::token_to_id(std::string_view token) const {
  const int id = processor_->PieceToId(token);
  if (!valid_id(id) || processor_->IdToPiece(id) != token) return std::nullopt;
  return id;
}

size_t SentencePieceTokenizer::vocab_size() const { return static_cast<size_t>(processor_->GetPieceSize()); }

std::optional<int32_t> SentencePieceTokenizer::default_bos_id() const {
  if (processor_->bos_id() < 0) return std::nullopt;
  return processor_->bos_id();
}

std::vector<int32_t> SentencePieceTokenizer::default_eos_ids() const {
  if (processor_->eos_id() < 0) return {};
  return {processor_->eos_id()};
}

}  // namespace qlm::runtime::tok
