#include "runtime/tokenizer/bpe_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <queue>

#include "core/error.h"
#include "runtime/tokenizer/unicode.h"

namespace qlm::runtime::tok {

namespace {
constexpr int64_t kMaxTokenId = int64_t{1} << 24;  // far above any real vocabulary; bounds the id table
}  // namespace

BpeModel::BpeModel(const Field& field) {
  field.require_object();
  // Old files leave out "type"; a model with merges is then a BPE.
  const std::string type = field.has("type") ? field.type_name() : (field.has("merges") ? "BPE" : "(untyped)");
  if (type != "BPE") field.fail_unsupported("model type \"" + type + "\"");
  if (field.has("dropout")) {
    const Field dropout = field.at("dropout");
    if (!dropout.json().is_number() || dropout.json().get<double>() != 0.0)
      dropout.fail_unsupported("BPE dropout");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (field.has(key) && !field.string_at(key).empty()) field.at(key).fail_unsupported(std::string("BPE ") + key);
  }
  fuse_unk_ = field.bool_or("fuse_unk", false);
  byte_fallback_ = field.bool_or("byte_fallback", false);
  ignore_merges_ = field.bool_or("ignore_merges", false);

  load_vocab(field.at("vocab"));
  load_merges(field.at("merges"));

  if (const auto unk = field.opt_string("unk_token")) {
    unk_id_ = token_to_id(*unk);
    if (!unk_id_) field.at("unk_token").fail_value(fmt::format("unk_token \"{}\" is not in the vocabulary", *unk));
  }
  cut_at_metaspace_ = metaspace_cuts_are_exact();
  for (int b = 0; b < 256; ++b) {
    const auto id = token_to_id(fmt::format("<0x{:02X}>", b));
    byte_ids_[b] = id ? *id : -1;
  }
}

void BpeModel::load_vocab(const Field& vocab) {
  vocab.require_object();
  vocab_.reserve(vocab.json().size());
  // Raw access in the loop (vocabularies have 10^5 entries); a Field is built only to report.
  for (const auto& [token, value] : vocab.json().items()) {
    if (!value.is_number_integer()) Field(value, vocab.file(), vocab.path() + "[\"" + token + "\"]").as_int();
    const int64_t id = value.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(value.get<uint64_t>(), kMaxTokenId))
                                                  : value.get<int64_t>();
    if (id < 0 || id >= kMaxTokenId)
      fail("tokenizer.vocab", ErrorContext{vocab.file(), "", ""}, "", "{}[\"{}\"]: id {} is out of range [0, {})",
           vocab.path(), token, id, kMaxTokenId);
    if (static_cast<size_t>(id) >= id_to_token_.size()) id_to_token_.resize(id + 1);
    if (id_to_token_[id] != nullptr)
      fail("tokenizer.vocab", ErrorContext{vocab.file(), "", ""}, "each id must appear once",
           "{}: tokens \"{}\" and \"{}\" share id {}", vocab.path(), *id_to_token_[id], token, id);
    const auto it = vocab_.emplace(token, static_cast<int32_t>(id)).first;
    id_to_token_[id] = &it->first;  // map nodes are stable
  }
}

void BpeModel::load_merges(const Field& merges) {
  const size_t count = merges.size();
  merges_.reserve(count);
  std::string merged;
  for (size_t rank = 0; rank < count; ++rank) {
    const Json& entry = merges.json()[rank];
    const auto malformed = [&]() {
      fail("tokenizer.merges", ErrorContext{merges.file(), "", ""}, "each merge is \"left right\" or [left, right]",
           "{}[{}]: malformed merge {}", merges.path(), rank, entry.dump());
    };
    std::string_view left, right;
    if (entry.is_string()) {
      // "a b": exactly one space separates the two tokens (neither contains a space).
      const std::string& line = entry.get_ref<const std::string&>();
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) malformed();
      left = std::string_view(line).substr(0, space);
      right = std::string_view(line).substr(space + 1);
    } else if (entry.is_array() && entry.size() == 2) {
      for (size_t side = 0; side < 2; ++side)
        if (!entry[side].is_string()) merges.at(rank).at(side).as_string();  // reports the type
      left = entry[0].get_ref<const std::string&>();
      right = entry[1].get_ref<const std::string&>();
    } else {
      malformed();
    }
    merged.assign(left).append(right);
    const auto left_id = token_to_id(left);
    const auto right_id = token_to_id(right);
    const auto merged_id = token_to_id(merged);
    if (!left_id || !right_id || !merged_id)
      fail("tokenizer.merges", ErrorContext{merges.file(), "", ""}, "the merges must match the vocabulary",
           "{}[{}]: merge \"{}\" + \"{}\" uses a token missing from model.vocab (\"{}\")", merges.path(), rank, left,
           right, !left_id ? left : !right_id ? right : std::string_view(merged));
    // A repeated pair keeps its first (best) rank.
    merges_.try_emplace(pair_key(*left_id, *right_id), Merge{static_cast<int32_t>(rank), *merged_id});
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return nullptr;
  return id_to_token_[id];
}

namespace {
constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581
}  // namespace

bool BpeModel::metaspace_cuts_are_exact() const {
  if (!token_to_id(kMetaspace)) return false;  // an unknown "▁" could fuse with an unknown neighbour
  for (const auto& [token, id] : vocab_) {
    for (size_t at = token.find(kMetaspace, 1); at != std::string::npos; at = token.find(kMetaspace, at + 1)) {
      if (at < kMetaspace.size() || token.compare(at - kMetaspace.size(), kMetaspace.size(), kMetaspace) != 0)
        return false;
    }
  }
  return true;
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (!cut_at_metaspace_) return tokenize_word(word, out);
  // Cut before every "▁" that follows another character.
  size_t begin = 0;
  for (size_t at = word.find(kMetaspace, 1); at != std::string_view::npos; at = word.find(kMetaspace, at + 1)) {
    if (at >= kMetaspace.size() && word.compare(at - kMetaspace.size(), kMetaspace.size(), kMetaspace) == 0) continue;
    tokenize_word(word.substr(begin, at - begin), out);
    begin = at;
  }
  tokenize_word(word.substr(begin), out);
}

void BpeModel::tokenize_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  if (ignore_merges_) {
    if (const auto id = token_to_id(word)) out.push_back(*id);
    else merge_word(word, out);
  } else {
    merge_word(word, out);
  }
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
  }
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& ids) const {
  bool previous_unk = false;
  size_t offset = 0;
  while (offset < word.size()) {
    const size_t begin = offset;
    next_codepoint(word, offset);
    const std::string_view character = word.substr(begin, offset - begin);
    if (const auto id = token_to_id(character)) {
      ids.push_back(*id);
      previous_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all_bytes = true;
      for (const char c : character) all_bytes = all_bytes && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all_bytes) {
        for (const char c : character) ids.push_back(byte_ids_[static_cast<unsigned char>(c)]);
        previous_unk = false;
        continue;
      }
    }
    if (!unk_id_) continue;  // no unknown token: the character is dropped, as the reference does
    if (!(fuse_unk_ && previous_unk)) ids.push_back(*unk_id_);
    previous_unk = true;
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev;  // index of the previous live symbol, -1 at the start
    int32_t next;  // index of the next live symbol, -1 at the end
    bool live;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;  // left symbol of the pair
    int32_t merged_id;
  };
  // Lowest rank first; among equal ranks the leftmost pair.
  const auto later = [](const Candidate& a, const Candidate& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; };

  std::vector<int32_t> ids;
  ids.reserve(word.size());
  initial_symbols(word, ids);
  const auto n = static_cast<int32_t>(ids.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) symbols[i] = Symbol{ids[i], i - 1, i + 1 < n ? i + 1 : -1, true};

  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  const auto consider = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    const auto it = merges_.find(pair_key(symbols[pos].id, symbols[next].id));
    if (it != merges_.end()) queue.push(Candidate{it->second.rank, pos, it->second.merged_id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.live || left.next < 0) continue;
    // A queued candidate is stale once either side has merged with something else. Like the
    // reference implementation, it is still taken if the current pair yields the same token.
    const auto it = merges_.find(pair_key(left.id, symbols[left.next].id));
    if (it == merges_.end() || it->second.merged_id != top.merged_id) continue;
    Symbol& right = symbols[left.next];
    left.id = top.merged_id;
    right.live = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (int32_t i = 0; i < n; ++i)
    if (symbols[i].live) out.push_back(symbols[i].id);
}

}  // namespace qlm::runtime::tok
