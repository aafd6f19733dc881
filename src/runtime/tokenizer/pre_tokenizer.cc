#include "runtime/tokenizer/pre_tokenizer.h"

#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/pattern.h"
#include "runtime/tokenizer/regex.h"
#include "runtime/tokenizer/unicode.h"

namespace qlm::runtime::tok {
namespace {

// The GPT-2 word pattern, used by ByteLevel with use_regex.
constexpr std::string_view kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

using Ranges = std::vector<std::pair<size_t, size_t>>;

// Appends the kept pieces of `piece` to `out`.
void emit_ranges(const Piece& piece, const Ranges& ranges, std::vector<Piece>& out) {
  for (const auto& [begin, end] : ranges) {
    if (begin == end) continue;
    out.push_back(Piece{piece.text.substr(begin, end - begin), piece.at_start && begin == 0});
  }
}

class Split final : public PreTokenizer {
 public:
  explicit Split(const Field& field) : pattern_(field.at("pattern")), invert_(field.bool_or("invert", false)) {
    const Field behavior_field = field.at("behavior");
    const std::string behavior = behavior_field.as_string();
    if (behavior == "Removed") behavior_ = SplitBehavior::kRemoved;
    else if (behavior == "Isolated") behavior_ = SplitBehavior::kIsolated;
    else if (behavior == "MergedWithPrevious") behavior_ = SplitBehavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext") behavior_ = SplitBehavior::kMergedWithNext;
    else if (behavior == "Contiguous") behavior_ = SplitBehavior::kContiguous;
    else behavior_field.fail_unsupported("split behavior \"" + behavior + "\"");
  }

  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    out.reserve(pieces.size() * 4);
    for (const Piece& piece : pieces)
      emit_ranges(piece, split_ranges(piece.text.size(), pattern_.find_all(piece.text), behavior_, invert_), out);
    pieces = std::move(out);
  }

 private:
  Pattern pattern_;
  bool invert_;
  SplitBehavior behavior_ = SplitBehavior::kIsolated;
};

class ByteLevel final : public PreTokenizer {
 public:
  explicit ByteLevel(const Field& field) : add_prefix_space_(field.bool_or("add_prefix_space", true)) {
    if (field.bool_or("use_regex", true)) regex_ = std::make_unique<Regex>(kGpt2Pattern, field.file(), "GPT-2 pattern");
  }

  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    out.reserve(pieces.size() * (regex_ ? 4 : 1));
    for (Piece& piece : pieces) {
      if (add_prefix_space_ && (piece.text.empty() || piece.text[0] != ' ')) piece.text.insert(0, " ");
      if (!regex_) {
        if (!piece.text.empty()) out.push_back(Piece{to_byte_level(piece.text), piece.at_start});
        continue;
      }
      for (const auto& [begin, end] : split_ranges(piece.text.size(), regex_->find_all(piece.text),
                                                   SplitBehavior::kIsolated, false)) {
        if (begin == end) continue;
        out.push_back(Piece{to_byte_level(std::string_view(piece.text).substr(begin, end - begin)),
                            piece.at_start && begin == 0});
      }
    }
    pieces = std::move(out);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

class Metaspace final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };

  explicit Metaspace(const Field& field) : replacement_(field.string_at("replacement")), split_(field.bool_or("split", true)) {
    if (field.has("prepend_scheme")) {
      const Field scheme_field = field.at("prepend_scheme");
      const std::string scheme = scheme_field.as_string();
      if (scheme == "always") prepend_ = Prepend::kAlways;
      else if (scheme == "first") prepend_ = Prepend::kFirst;
      else if (scheme == "never") prepend_ = Prepend::kNever;
      else scheme_field.fail_unsupported("prepend_scheme \"" + scheme + "\"");
    } else {
      prepend_ = field.bool_or("add_prefix_space", true) ? Prepend::kAlways : Prepend::kNever;  // older files
    }
  }

  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (Piece& piece : pieces) {
      std::string text;
      text.reserve(piece.text.size() + replacement_.size());
      for (const char c : piece.text) {
        if (c == ' ') text += replacement_;
        else text += c;
      }
      const bool prepend = prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && piece.at_start);
      if (prepend && !text.starts_with(replacement_)) text.insert(0, replacement_);
      Piece replaced{std::move(text), piece.at_start};
      if (!split_) {
        if (!replaced.text.empty()) out.push_back(std::move(replaced));
        continue;
      }
      Ranges matches;
      for (size_t at = replaced.text.find(replacement_); at != std::string::npos;
           at = replaced.text.find(replacement_, at + replacement_.size()))
        matches.emplace_back(at, at + replacement_.size());
      emit_ranges(replaced, split_ranges(replaced.text.size(), matches, SplitBehavior::kMergedWithNext, false), out);
    }
    pieces = std::move(out);
  }

 private:
  std::string replacement_;
  bool split_;
  Prepend prepend_ = Prepend::kAlways;
};

// Numeric characters (Unicode N categories) cut out one by one or as runs.
class Digits final : public PreTokenizer {
 public:
  explicit Digits(const Field& field)
      : behavior_(field.bool_or("individual_digits", false) ? SplitBehavior::kIsolated : SplitBehavior::kContiguous) {}

  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const Piece& piece : pieces) {
      Ranges matches;
      for (size_t offset = 0; offset < piece.text.size();) {
        const size_t begin = offset;
        if (is_numeric(next_codepoint(piece.text, offset))) matches.emplace_back(begin, offset);
      }
      emit_ranges(piece, split_ranges(piece.text.size(), matches, behavior_, false), out);
    }
    pieces = std::move(out);
  }

 private:
  SplitBehavior behavior_;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void split(std::vector<Piece>& pieces) const override {
    for (const auto& step : steps_) step->split(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace

Ranges split_ranges(size_t size, const Ranges& matches, SplitBehavior behavior, bool invert) {
  // Every byte of [0, size) in order, each range flagged as a delimiter match or not.
  std::vector<std::pair<std::pair<size_t, size_t>, bool>> parts;
  parts.reserve(matches.size() * 2 + 1);
  size_t previous = 0;
  for (const auto& [begin, end] : matches) {
    if (begin != previous) parts.push_back({{previous, begin}, invert});
    parts.push_back({{begin, end}, !invert});
    previous = end;
  }
  if (previous != size) parts.push_back({{previous, size}, invert});

  Ranges out;
  out.reserve(parts.size());
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& [range, is_match] : parts)
        if (!is_match) out.push_back(range);
      break;
    case SplitBehavior::kIsolated:
      for (const auto& part : parts) out.push_back(part.first);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& [range, is_match] : parts) {
        if (is_match && !previous_match && !out.empty()) out.back().second = range.second;
        else out.push_back(range);
        previous_match = is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool next_match = false;  // walking backwards: whether the part after this one is a match
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        const auto& [range, is_match] = *it;
        if (is_match && !next_match && !out.empty()) out.back().first = range.first;
        else out.push_back(range);
        next_match = is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const auto& [range, is_match] : parts) {
        if (is_match == previous_match && !out.empty()) out.back().second = range.second;
        else out.push_back(range);
        previous_match = is_match;
      }
      break;
    }
  }
  return out;
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Field& field) {
  if (field.is_null()) return nullptr;
  const std::string type = field.type_name();
  if (type == "ByteLevel") return std::make_unique<ByteLevel>(field);
  if (type == "Split") return std::make_unique<Split>(field);
  if (type == "Metaspace") return std::make_unique<Metaspace>(field);
  if (type == "Digits") return std::make_unique<Digits>(field);
  if (type == "Sequence") {
    const Field list = field.at("pretokenizers");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list.size(); ++i)
      if (auto step = make_pre_tokenizer(list.at(i))) steps.push_back(std::move(step));
    return std::make_unique<Sequence>(std::move(steps));
  }
  field.fail_unsupported("pre_tokenizer type \"" + type + "\"");
}

}  // namespace qlm::runtime::tok
