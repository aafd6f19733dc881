// tokenizer.json "model" of type BPE: vocabulary, ranked merges, byte fallback, unknown token,
// ignore_merges. Words are merged with a priority queue of pair ranks (O(n log n) per word) and
// remembered in a bounded cache.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/tokenizer/json_fields.h"
#include "runtime/tokenizer/string_map.h"

namespace qlm::runtime::tok {

class BpeModel {
 public:
  // `field` is the "model" object; throws "tokenizer.unsupported" for other model types and
  // "tokenizer.vocab" / "tokenizer.merges" for inconsistent data.
  explicit BpeModel(const Field& field);

  // Appends the ids of one pre-tokenized word. Thread-safe.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // nullptr when `id` is not in the vocabulary.
  const std::string* id_to_token(int32_t id) const;
  // One more than the largest id.
  size_t vocab_size() const { return id_to_token_.size(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void load_vocab(const Field& vocab);
  void load_merges(const Field& merges);
  void tokenize_word(std::string_view word, std::vector<int32_t>& out) const;
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  // Whether no vocabulary token has a "▁" right after another character, so that BPE can never
  // merge across such a point and a word can be cut there with an identical result. Holds for
  // SentencePiece-style vocabularies, whose text is otherwise one huge word (no pre-tokenizer).
  bool metaspace_cuts_are_exact() const;
  // The initial symbols of `word`: one per character, byte tokens or unk where it is unknown.
  void initial_symbols(std::string_view word, std::vector<int32_t>& ids) const;

  StringMap<int32_t> vocab_;
  std::vector<const std::string*> id_to_token_;  // keys of vocab_; nullptr for unused ids
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool cut_at_metaspace_ = false;
  int32_t byte_ids_[256];  // "<0xXX>" ids for byte fallback, -1 if absent

  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kCacheMaxWordBytes = 256;
  mutable std::mutex cache_mutex_;
  mutable StringMap<std::vector<int32_t>> cache_;
};

}  // namespace qlm::runtime::tok
