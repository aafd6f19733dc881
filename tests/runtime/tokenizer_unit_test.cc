// Building blocks of the tokenizer: UTF-8 repair, the byte-level alphabet, split behaviours,
// merge order, added-token flags, streaming, and concurrent use.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/unicode.h"
#include "runtime/tokenizer_test_util.h"
#include "support/temp_dir.h"

namespace qlm::runtime {
namespace {

using nlohmann::json;
using qlm::testing::TempDir;
using testing::load_json;
using testing::tiny_bpe_json;

const std::string kFffd = "\xEF\xBF\xBD";

TEST(TokenizerUtf8, LossyReplacesMaximalInvalidSubparts) {
  EXPECT_EQ(tok::utf8_lossy("abc"), "abc");
  EXPECT_EQ(tok::utf8_lossy("a\xFF" "b"), "a" + kFffd + "b");
  EXPECT_EQ(tok::utf8_lossy("\xF0\x9F\x98"), kFffd);               // truncated: one replacement
  EXPECT_EQ(tok::utf8_lossy("\xF0\x9F\x98" "a"), kFffd + "a");     // cut short by an ASCII byte
  EXPECT_EQ(tok::utf8_lossy("\xC0\x80"), kFffd + kFffd);           // overlong: each byte invalid
  EXPECT_EQ(tok::utf8_lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate
  EXPECT_EQ(tok::utf8_lossy("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
}

TEST(TokenizerUtf8, EmittablePrefixHoldsBackOnlyTruncatedTails) {
  EXPECT_EQ(tok::utf8_emittable_prefix("ab\xF0\x9F"), 2u);
  EXPECT_EQ(tok::utf8_emittable_prefix("ab\xF0\x9F\x98\x80"), 6u);
  EXPECT_EQ(tok::utf8_emittable_prefix("\xFF"), 1u);  // can never complete: emitted (as U+FFFD)
  EXPECT_EQ(tok::utf8_emittable_prefix(""), 0u);
}

TEST(TokenizerByteLevel, AlphabetRoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string mapped = tok::to_byte_level(all);
  std::string back;
  ASSERT_TRUE(tok::append_from_byte_level(mapped, back));
  EXPECT_EQ(back, all);
  EXPECT_EQ(tok::byte_level_char(' '), "\xC4\xA0");  // Ġ
  EXPECT_EQ(tok::byte_level_char('a'), "a");
  std::string unchanged = "x";
  EXPECT_FALSE(tok::append_from_byte_level("a b", unchanged));  // a plain space is not in the alphabet
  EXPECT_EQ(unchanged, "x");
}

TEST(TokenizerSplit, Behaviours) {
  // "a-b--c" split at each "-".
  const std::vector<std::pair<size_t, size_t>> dashes = {{1, 2}, {3, 4}, {4, 5}};
  using R = std::vector<std::pair<size_t, size_t>>;
  using tok::SplitBehavior;
  EXPECT_EQ(tok::split_ranges(6, dashes, SplitBehavior::kRemoved, false), (R{{0, 1}, {2, 3}, {5, 6}}));
  EXPECT_EQ(tok::split_ranges(6, dashes, SplitBehavior::kIsolated, false), (R{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}}));
  EXPECT_EQ(tok::split_ranges(6, dashes, SplitBehavior::kMergedWithPrevious, false), (R{{0, 2}, {2, 4}, {4, 5}, {5, 6}}));
  EXPECT_EQ(tok::split_ranges(6, dashes, SplitBehavior::kMergedWithNext, false), (R{{0, 1}, {1, 3}, {3, 4}, {4, 6}}));
  EXPECT_EQ(tok::split_ranges(6, dashes, SplitBehavior::kContiguous, false), (R{{0, 1}, {1, 2}, {2, 3}, {3, 5}, {5, 6}}));
  EXPECT_EQ(tok::split_ranges(6, dashes, SplitBehavior::kRemoved, true), (R{{1, 2}, {3, 4}, {4, 5}}));
}

TEST(TokenizerBpe, MergesFollowRankNotPosition) {
  TempDir dir;
  const auto tokenizer = load_json(dir, tiny_bpe_json());
  EXPECT_EQ(tokenizer->encode("abc"), (std::vector<int32_t>{5}));        // b+c (rank 0), then a+bc
  EXPECT_EQ(tokenizer->encode("abab"), (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(tokenizer->encode("cab"), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(tokenizer->encode("xa"), (std::vector<int32_t>{0}));         // unknown, no unk token: dropped
  EXPECT_EQ(tokenizer->decode(std::vector<int32_t>{3, 2, 99}), "ab c");  // no decoder: joined by spaces
}

TEST(TokenizerBpe, IgnoreMergesEmitsWholeVocabularyWords) {
  TempDir dir;
  json doc = tiny_bpe_json();
  doc["model"]["vocab"]["ca"] = 7;  // reachable only through ignore_merges: no merge builds it
  EXPECT_EQ(load_json(dir, doc)->encode("ca"), (std::vector<int32_t>{2, 0}));
  doc["model"]["ignore_merges"] = true;
  EXPECT_EQ(load_json(dir, doc)->encode("ca"), (std::vector<int32_t>{7}));
}

TEST(TokenizerBpe, WordsAreCutAtMetaspaceOnlyWhenNoTokenSpansIt) {
  TempDir dir;
  json doc = tiny_bpe_json();
  doc["model"]["vocab"] = json{{"a", 0}, {"\u2581", 1}, {"b", 2}, {"\u2581b", 3}, {"a\u2581", 4}};
  doc["model"]["merges"] = json::array({"\u2581 b", "a \u2581"});
  EXPECT_EQ(load_json(dir, doc)->encode("a\u2581b"), (std::vector<int32_t>{0, 3}));
  doc["model"]["merges"] = json::array({"a \u2581", "\u2581 b"});  // "a▁" first: it must win
  EXPECT_EQ(load_json(dir, doc)->encode("a\u2581b"), (std::vector<int32_t>{4, 2}));
}

TEST(TokenizerBpe, ByteFallbackAndFusedUnknown) {
  TempDir dir;
  json doc = tiny_bpe_json();
  doc["model"]["vocab"]["<unk>"] = 8;
  doc["model"]["unk_token"] = "<unk>";
  doc["model"]["fuse_unk"] = true;
  EXPECT_EQ(load_json(dir, doc)->encode("xyza"), (std::vector<int32_t>{8, 0}));
  doc["model"]["byte_fallback"] = true;
  doc["model"]["vocab"]["<0x78>"] = 9;  // 'x'; 'y' has no byte token and stays unknown
  EXPECT_EQ(load_json(dir, doc)->encode("xya"), (std::vector<int32_t>{9, 8, 0}));
}

TEST(TokenizerAddedTokens, StripFlagsAndSingleWord) {
  TempDir dir;
  json doc = tiny_bpe_json();
  doc["added_tokens"] = json::array({
      json{{"id", 10}, {"content", "<L>"}, {"lstrip", true}, {"rstrip", false}, {"single_word", false}, {"normalized", false}, {"special", true}},
      json{{"id", 11}, {"content", "<R>"}, {"lstrip", false}, {"rstrip", true}, {"single_word", false}, {"normalized", false}, {"special", false}},
      json{{"id", 12}, {"content", "ab"}, {"lstrip", false}, {"rstrip", false}, {"single_word", true}, {"normalized", false}, {"special", false}},
      json{{"id", 13}, {"content", "<R>x"}, {"lstrip", false}, {"rstrip", false}, {"single_word", false}, {"normalized", false}, {"special", false}},
  });
  const auto tokenizer = load_json(dir, doc);
  EXPECT_EQ(tokenizer->encode("a  <L>b"), (std::vector<int32_t>{0, 10, 1}));
  EXPECT_EQ(tokenizer->encode("a<R>  b"), (std::vector<int32_t>{0, 11, 1}));
  EXPECT_EQ(tokenizer->encode("<R>xa"), (std::vector<int32_t>{13, 0}));  // longest match wins
  EXPECT_EQ(tokenizer->encode("c ab c"), (std::vector<int32_t>{2, 6, 12, 6, 2}));
  EXPECT_EQ(tokenizer->encode("cab"), (std::vector<int32_t>{2, 3}));  // "ab" inside a word is not the added token
  EXPECT_TRUE(tokenizer->is_special(10));
  EXPECT_FALSE(tokenizer->is_special(11));
  EXPECT_EQ(tokenizer->decode(std::vector<int32_t>{10, 0}, true), "a");
  EXPECT_EQ(tokenizer->decode(std::vector<int32_t>{10, 0}, false), "<L> a");
  EXPECT_EQ(tokenizer->vocab_size(), 14u);
}

TEST(TokenizerStream, HoldsBackSplitCharacters) {
  const auto tokenizer = Tokenizer::from_model_dir(std::filesystem::path(QLM_TEST_DATA_DIR) / "tokenizers/llama2");
  // The crab is not in the training corpus: four byte-fallback tokens.
  const std::vector<int32_t> ids = tokenizer->encode("a🦀", false);
  ASSERT_GE(ids.size(), 5u);
  StreamDecoder stream(*tokenizer);
  std::vector<std::string> pieces;
  for (const int32_t id : ids) pieces.push_back(stream.push(id));
  EXPECT_EQ(pieces[pieces.size() - 4], "");
  EXPECT_EQ(pieces[pieces.size() - 2], "");
  EXPECT_EQ(pieces.back(), "🦀");
  EXPECT_EQ(stream.finish(), "");

  // A stream cut inside a character flushes it as U+FFFD.
  StreamDecoder cut(*tokenizer);
  std::string text;
  for (size_t i = 0; i + 1 < ids.size(); ++i) text += cut.push(ids[i]);
  EXPECT_EQ(text + cut.finish(), " a" + kFffd);
}

TEST(TokenizerStream, SkipsSpecialTokensUnlessAsked) {
  const auto tokenizer = Tokenizer::from_model_dir(std::filesystem::path(QLM_TEST_DATA_DIR) / "tokenizers/qwen2");
  const std::vector<int32_t> ids = tokenizer->encode("<|im_start|>user\nhi<|im_end|>");
  std::string skipped, kept;
  StreamDecoder skipping(*tokenizer), keeping(*tokenizer, false);
  for (const int32_t id : ids) {
    skipped += skipping.push(id);
    kept += keeping.push(id);
  }
  EXPECT_EQ(skipped, "user\nhi");
  EXPECT_EQ(kept, "<|im_start|>user\nhi<|im_end|>");
}

TEST(TokenizerConcurrency, ParallelEncodesAgree) {
  const auto tokenizer = Tokenizer::from_model_dir(std::filesystem::path(QLM_TEST_DATA_DIR) / "tokenizers/llama3");
  const std::string text = "The quick brown fox jumps over the lazy dog 1234567. Ünïcödé ✓\n";
  const std::vector<int32_t> expected = tokenizer->encode(text);
  std::vector<std::thread> threads;
  std::vector<bool> ok(4, true);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) ok[t] = ok[t] && tokenizer->encode(text + std::to_string(i)).size() > expected.size() - 1;
    });
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_TRUE(ok[t]);
  EXPECT_EQ(tokenizer->encode(text), expected);
}

}  // namespace
}  // namespace qlm::runtime
