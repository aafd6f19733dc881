// Every way a tokenizer directory can be unusable gives a "tokenizer.*" error that names the file
// and the field.
#include <gtest/gtest.h>

#include "runtime/tokenizer/hf_tokenizer.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer_test_util.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qlm::runtime {
namespace {

using nlohmann::json;
using qlm::testing::TempDir;
using testing::load_json;
using testing::tiny_bpe_json;

TEST(TokenizerErrors, MissingFiles) {
  TempDir dir;
  EXPECT_QLM_ERROR(Tokenizer::from_model_dir(dir.path()), "tokenizer.missing", "tokenizer.json or tokenizer.model");
  EXPECT_QLM_ERROR(Tokenizer::from_model_dir(dir / "does-not-exist"), "tokenizer.missing", "does-not-exist");
}

TEST(TokenizerErrors, NotJson) {
  TempDir dir;
  dir.write("tokenizer.json", "{\"model\": ");
  EXPECT_QLM_ERROR(Tokenizer::from_model_dir(dir.path()), "tokenizer.parse", "tokenizer.json");
}

// The text entry point (the fuzz target's) names the caller's stand-in for the file, and loads what the file does.
TEST(TokenizerErrors, FromJsonTextNamesItsSource) {
  EXPECT_QLM_ERROR(tok::HfTokenizer::from_json("{\"model\": ", "inline.tokenizer.json"), "tokenizer.parse",
                   "inline.tokenizer.json");
  json doc = tiny_bpe_json();
  doc["model"]["type"] = "Unigram";
  EXPECT_QLM_ERROR(tok::HfTokenizer::from_json(doc.dump(), "inline.tokenizer.json"), "tokenizer.unsupported",
                   "inline.tokenizer.json");
  const auto tokenizer = tok::HfTokenizer::from_json(tiny_bpe_json().dump(), "inline.tokenizer.json");
  EXPECT_GT(tokenizer->vocab_size(), 0u);
}

// JSON that nlohmann's parser rejects with another exception than parse_error, or reads only in part: each is a
// "tokenizer.parse" error, not a crash (found by fuzz_tokenizer: a number beyond the double range terminated qlm).
TEST(TokenizerErrors, NumbersBeyondDoubleAndNulBytesAreParseErrors) {
  std::string huge = tiny_bpe_json().dump();
  huge.insert(1, "\"x\": 888888888888.8e2888888, ");
  EXPECT_QLM_ERROR(tok::HfTokenizer::from_json(huge, "t.json"), "tokenizer.parse", "number overflow");
  std::string nul = tiny_bpe_json().dump();
  nul += std::string("\0", 1) + "garbage";
  EXPECT_QLM_ERROR(tok::HfTokenizer::from_json(nul, "t.json"), "tokenizer.parse", "NUL byte");
  TempDir dir;
  dir.write("tokenizer.json", "{\"model\": 1e400}");
  EXPECT_QLM_ERROR(Tokenizer::from_model_dir(dir.path()), "tokenizer.parse", "tokenizer.json");
}

TEST(TokenizerErrors, UnsupportedModelTypesAreNamed) {
  for (const char* type : {"WordPiece", "Unigram", "WordLevel"}) {
    TempDir dir;
    json doc = tiny_bpe_json();
    doc["model"]["type"] = type;
    EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.unsupported", std::string("model type \"") + type + "\"");
  }
}

TEST(TokenizerErrors, UnsupportedComponentsAreNamed) {
  const std::vector<std::pair<std::string, json>> cases = {
      {"normalizer", json{{"type", "BertNormalizer"}}},
      {"normalizer", json{{"type", "Sequence"}, {"normalizers", json::array({json{{"type", "Precompiled"}}})}}},
      {"pre_tokenizer", json{{"type", "Whitespace"}}},
      {"decoder", json{{"type", "WordPiece"}}},
      {"post_processor", json{{"type", "SomethingNew"}}},
  };
  for (const auto& [field, value] : cases) {
    TempDir dir;
    json doc = tiny_bpe_json();
    doc[field] = value;
    const std::string name = value.contains("normalizers") ? "Precompiled" : value["type"].get<std::string>();
    EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.unsupported", "\"" + name + "\"");
  }
}

TEST(TokenizerErrors, UnsupportedBpeOptions) {
  TempDir dir;
  json doc = tiny_bpe_json();
  doc["model"]["continuing_subword_prefix"] = "##";
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.unsupported", "model.continuing_subword_prefix");
  doc = tiny_bpe_json();
  doc["model"]["dropout"] = 0.1;
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.unsupported", "dropout");
}

TEST(TokenizerErrors, MalformedMerges) {
  TempDir dir;
  json doc = tiny_bpe_json();
  doc["model"]["merges"] = json::array({"b c", "abc"});
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.merges", "model.merges[1]: malformed merge \"abc\"");
  doc["model"]["merges"] = json::array({"a b c"});
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.merges", "model.merges[0]");
  doc["model"]["merges"] = json::array({json::array({"a"})});
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.merges", "model.merges[0]");
  doc["model"]["merges"] = json::array({json::array({1, 2})});
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.field", "model.merges[0][0] must be string");
  doc["model"]["merges"] = json::array({"c a"});
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.merges", "missing from model.vocab (\"ca\")");
  doc["model"]["merges"] = json::array({"x y"});
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.merges", "(\"x\")");
}

TEST(TokenizerErrors, MissingOrMistypedFields) {
  TempDir dir;
  json doc = tiny_bpe_json();
  doc["model"].erase("vocab");
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.field", "missing field model.vocab");
  doc = tiny_bpe_json();
  doc["model"]["vocab"]["a"] = "0";
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.field", "model.vocab[\"a\"] must be integer, found string");
  doc = tiny_bpe_json();
  doc.erase("model");
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.field", "missing field model");
  doc = tiny_bpe_json();
  doc["added_tokens"] = json::array({json{{"content", "<s>"}}});
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.field", "missing field added_tokens[0].id");
}

TEST(TokenizerErrors, InconsistentVocabulary) {
  TempDir dir;
  json doc = tiny_bpe_json();
  doc["model"]["vocab"]["d"] = 0;
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.vocab", "share id 0");
  doc = tiny_bpe_json();
  doc["model"]["vocab"]["d"] = -1;
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.vocab", "out of range");
  doc = tiny_bpe_json();
  doc["model"]["unk_token"] = "<unk>";
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.field", "model.unk_token");
}

TEST(TokenizerErrors, BadRegexNamesTheField) {
  TempDir dir;
  json doc = tiny_bpe_json();
  doc["pre_tokenizer"] =
      json{{"type", "Split"}, {"pattern", json{{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}, {"invert", false}};
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.regex", "pre_tokenizer.pattern.Regex");
  doc["pre_tokenizer"]["pattern"] = json{{"Regex", "a"}};
  doc["pre_tokenizer"]["behavior"] = "Sideways";
  EXPECT_QLM_ERROR(load_json(dir, doc), "tokenizer.unsupported", "split behavior \"Sideways\"");
}

TEST(TokenizerErrors, InvalidUtf8Input) {
  TempDir dir;
  const auto tokenizer = load_json(dir, tiny_bpe_json());
  EXPECT_QLM_ERROR(tokenizer->encode("ab\xFF"), "tokenizer.input", "byte 2");
  EXPECT_QLM_ERROR(tokenizer->encode("\xE2\x82"), "tokenizer.input", "byte 0");
}

TEST(TokenizerErrors, CorruptSentencePieceModel) {
  TempDir dir;
  dir.write("tokenizer.model", "definitely not a protobuf");
  EXPECT_QLM_ERROR(Tokenizer::from_model_dir(dir.path()), "tokenizer.sentencepiece", "tokenizer.model");
}

TEST(TokenizerErrors, MistypedConfigIds) {
  TempDir dir;
  dir.write("config.json", R"({"eos_token_id": "2"})");
  EXPECT_QLM_ERROR(load_json(dir, tiny_bpe_json()), "tokenizer.field", "config.json");
  dir.write("config.json", R"({"eos_token_id": [1, -4]})");
  EXPECT_QLM_ERROR(load_json(dir, tiny_bpe_json()), "tokenizer.field", "eos_token_id");
}

}  // namespace
}  // namespace qlm::runtime
