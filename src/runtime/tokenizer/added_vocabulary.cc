#include "runtime/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "runtime/tokenizer/unicode.h"

namespace qlm::runtime::tok {
namespace {

// Start of the character that ends at `end` (exclusive), for walking backwards through UTF-8.
size_t previous_char_start(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return start;
}

char32_t char_before(std::string_view text, size_t end) {
  size_t start = previous_char_start(text, end);
  return next_codepoint(text, start);
}

char32_t char_at(std::string_view text, size_t offset) { return next_codepoint(text, offset); }

}  // namespace

bool AddedVocabulary::Matcher::empty() const {
  return std::all_of(by_first_byte.begin(), by_first_byte.end(), [](const auto& list) { return list.empty(); });
}

AddedVocabulary::AddedVocabulary(const Field& added_tokens, const Normalizer* normalizer) {
  if (added_tokens.is_null()) return;
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const Field entry = added_tokens.at(i);
    AddedToken token;
    const int64_t id = entry.at("id").as_int();
    if (id < 0 || id >= (int64_t{1} << 24)) entry.at("id").fail_value("id out of range");
    token.id = static_cast<int32_t>(id);
    token.content = entry.string_at("content");
    if (token.content.empty()) entry.at("content").fail_value("empty added token");
    token.special = entry.bool_or("special", false);
    token.lstrip = entry.bool_or("lstrip", false);
    token.rstrip = entry.bool_or("rstrip", false);
    token.single_word = entry.bool_or("single_word", false);
    token.normalized = entry.bool_or("normalized", !token.special);
    std::string match_content = token.content;
    if (token.normalized && normalizer != nullptr) normalizer->normalize(match_content);

    const size_t index = tokens_.size();
    index_by_id_[token.id] = index;
    id_by_content_[token.content] = token.id;
    max_id_ = std::max(max_id_, token.id);
    tokens_.push_back(std::move(token));
    match_content_.push_back(std::move(match_content));
    if (!match_content_.back().empty()) add_to(tokens_.back().normalized ? normalized_ : raw_, index);
  }
  for (Matcher* matcher : {&raw_, &normalized_})
    for (auto& list : matcher->by_first_byte)
      std::stable_sort(list.begin(), list.end(),
                       [&](size_t a, size_t b) { return match_content_[a].size() > match_content_[b].size(); });
}

void AddedVocabulary::add_to(Matcher& matcher, size_t index) {
  auto& list = matcher.by_first_byte[static_cast<unsigned char>(match_content_[index][0])];
  list.push_back(index);
}

std::vector<AddedVocabulary::Segment> AddedVocabulary::split(std::string_view text, bool normalized_tokens) const {
  const Matcher& matcher = normalized_tokens ? normalized_ : raw_;
  std::vector<Segment> segments;
  size_t plain_begin = 0;  // start of the text not yet emitted
  size_t pos = 0;
  while (pos < text.size()) {
    const auto& candidates = matcher.by_first_byte[static_cast<unsigned char>(text[pos])];
    const AddedToken* found = nullptr;
    size_t stop = pos;
    for (const size_t index : candidates) {
      const std::string& content = match_content_[index];
      if (text.substr(pos).starts_with(content)) {
        found = &tokens_[index];
        stop = pos + content.size();
        break;
      }
    }
    if (found == nullptr) {
      ++pos;
      continue;
    }
    size_t start = pos;
    if (found->single_word) {
      const bool word_before = start > 0 && is_alphanumeric(char_before(text, start));
      const bool word_after = stop < text.size() && is_alphanumeric(char_at(text, stop));
      if (word_before || word_after) {
        pos = stop;
        continue;
      }
    }
    if (found->lstrip) {
      while (start > plain_begin && is_whitespace(char_before(text, start))) start = previous_char_start(text, start);
    }
    if (found->rstrip) {
      while (stop < text.size()) {
        size_t next = stop;
        if (!is_whitespace(next_codepoint(text, next))) break;
        stop = next;
      }
    }
    if (start > plain_begin) segments.push_back(Segment{plain_begin, start, -1});
    segments.push_back(Segment{start, stop, found->id});
    plain_begin = pos = stop;
  }
  if (plain_begin < text.size()) segments.push_back(Segment{plain_begin, text.size(), -1});
  return segments;
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  const auto it = index_by_id_.find(id);
  return it == index_by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocabulary::id_of(std::string_view content) const {
  const auto it = id_by_content_.find(content);
  if (it == id_by_content_.end()) return std::nullopt;
  return it->second;
}

}  // namespace qlm::runtime::tok
