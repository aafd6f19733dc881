#include "config/hf_config.h"

#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qlm::config {
namespace {

using qlm::testing::TempDir;

io::JsonView config_view(const std::string& text) {
  return io::JsonView(std::make_shared<const nlohmann::json>(io::parse_json_strict(text, "config.json")),
                      "config.json");
}

HfConfig parse(const std::string& text) { return HfConfig::from_json(config_view(text)); }

constexpr const char* kLlama = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "float16",
  "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "vocab_size": 256, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
  "max_position_embeddings": 2048, "tie_word_embeddings": false, "rope_scaling": null,
  "custom_field": [1, 2],
  "quantization_config": {"quant_method": "gptq", "bits": 4}
})";

TEST(HfConfig, ReadsLlamaConfig) {
  HfConfig c = parse(kLlama);
  EXPECT_EQ(c.architectures, std::vector<std::string>{"LlamaForCausalLM"});
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.dtype, "float16");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.vocab_size, 256);
  EXPECT_EQ(c.head_dim, std::nullopt);
  EXPECT_EQ(c.resolved_head_dim(), 16);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_FALSE(c.tie_word_embeddings);
  ASSERT_TRUE(c.quantization_config.has_value());
  EXPECT_EQ(c.quantization_config->get_int("bits"), 4);
  EXPECT_EQ(c.quantization_config->path(), "quantization_config");
  EXPECT_TRUE(c.raw.has("custom_field"));  // unknown keys stay reachable
}

TEST(HfConfig, Defaults) {
  HfConfig c = parse(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1,
                         "num_attention_heads": 8, "vocab_size": 10, "head_dim": 32})");
  EXPECT_TRUE(c.architectures.empty());
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.resolved_head_dim(), 32);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.dtype);
  EXPECT_FALSE(c.intermediate_size);
  EXPECT_FALSE(c.quantization_config);
  EXPECT_FALSE(c.rope_theta);
}

TEST(HfConfig, DtypeSpellings) {
  const std::string base = R"("model_type": "m", "hidden_size": 8, "num_hidden_layers": 1,
                              "num_attention_heads": 2, "vocab_size": 4)";
  EXPECT_EQ(parse("{" + base + R"(, "dtype": "bfloat16"})").dtype, "bfloat16");
  EXPECT_EQ(parse("{" + base + R"(, "torch_dtype": "bfloat16", "dtype": "bfloat16"})").dtype, "bfloat16");
  EXPECT_QLM_ERROR(parse("{" + base + R"(, "torch_dtype": "float16", "dtype": "bfloat16"})"), "config.conflict",
                   R"(torch_dtype = "float16" but dtype = "bfloat16")");
  EXPECT_QLM_ERROR(parse("{" + base + R"(, "dtype": 16})"), "config.type", "dtype: expected string, found integer");
}

TEST(HfConfig, RopeParametersSpelling) {
  HfConfig c = parse(R"({"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
      "vocab_size": 4, "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0}})");
  EXPECT_EQ(c.rope_theta, 500000.0);
  ASSERT_TRUE(c.rope_scaling);
  EXPECT_EQ(c.rope_scaling->get_string("rope_type"), "llama3");
}

TEST(HfConfig, TextConfigOfMultimodalWrapper) {
  HfConfig c = parse(R"({"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3",
      "torch_dtype": "bfloat16", "vision_config": {"hidden_size": 1024},
      "text_config": {"model_type": "mistral", "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
                      "num_key_value_heads": 1, "vocab_size": 100, "head_dim": 128, "tie_word_embeddings": true},
      "quantization_config": {"quant_method": "fp8"}})");
  EXPECT_EQ(c.model_type, "mistral3");
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.num_key_value_heads, 1);
  EXPECT_EQ(c.resolved_head_dim(), 128);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.text.path(), "text_config");
  EXPECT_TRUE(c.quantization_config);
  EXPECT_QLM_ERROR(parse(R"({"model_type": "m", "text_config": {"hidden_size": 32}})"), "config.missing_key",
                   "text_config.num_hidden_layers");
}

TEST(HfConfig, TypeErrorsNameKeyAndFile) {
  EXPECT_QLM_ERROR(parse(R"({"model_type": "m", "hidden_size": "64"})"), "config.type",
                   R"(file 'config.json': hidden_size: expected integer, found string "64")");
  EXPECT_QLM_ERROR(parse(R"({"model_type": "m", "hidden_size": 64.0})"), "config.type", "found float 64.0");
  EXPECT_QLM_ERROR(parse(R"({"hidden_size": 64})"), "config.missing_key", "model_type");
  EXPECT_QLM_ERROR(parse(R"({"model_type": "m", "architectures": "LlamaForCausalLM"})"), "config.type",
                   "architectures: expected list of strings");
  const std::string base = R"("model_type": "m", "hidden_size": 8, "num_hidden_layers": 1,
                              "num_attention_heads": 2, "vocab_size": 4)";
  EXPECT_QLM_ERROR(parse("{" + base + R"(, "tie_word_embeddings": 1})"), "config.type",
                   "tie_word_embeddings: expected boolean");
  EXPECT_QLM_ERROR(parse("{" + base + R"(, "quantization_config": "gptq"})"), "config.type",
                   "quantization_config: expected object");
  EXPECT_QLM_ERROR(parse("{" + base + R"(, "rms_norm_eps": "1e-6"})"), "config.type", "rms_norm_eps");
  EXPECT_QLM_ERROR(parse("{" + base + R"(, "rope_scaling": 2})"), "config.type", "rope_scaling: expected object");
}

TEST(HfConfig, ValueErrors) {
  auto with = [](const std::string& fields) {
    return parse(R"({"model_type": "m", "vocab_size": 4, "num_hidden_layers": 1, )" + fields + "}");
  };
  EXPECT_QLM_ERROR(with(R"("hidden_size": 0, "num_attention_heads": 2)"), "config.value",
                   "hidden_size: unsupported value 0; expected a positive integer");
  EXPECT_QLM_ERROR(with(R"("hidden_size": 8, "num_attention_heads": 4, "num_key_value_heads": 3)"), "config.value",
                   "a divisor of num_attention_heads (4)");
  EXPECT_QLM_ERROR(with(R"("hidden_size": 10, "num_attention_heads": 4)"), "config.value",
                   "a multiple of num_attention_heads (4)");
  EXPECT_NO_THROW(with(R"("hidden_size": 10, "num_attention_heads": 4, "head_dim": 16)"));
  EXPECT_QLM_ERROR(with(R"("hidden_size": 8, "num_attention_heads": 4, "head_dim": -1)"), "config.value", "head_dim");
}

TEST(HfConfig, LoadFromDirectory) {
  TempDir dir("qlm-hfconfig");
  dir.write("config.json", kLlama);
  HfConfig c = HfConfig::load(dir.path());
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.raw.source(), (dir / "config.json").string());
  TempDir empty("qlm-hfconfig-empty");
  EXPECT_QLM_ERROR(HfConfig::load(empty.path()), "json.read", "config.json");
  dir.write("config.json", R"({"model_type": "a", "model_type": "b"})");
  EXPECT_QLM_ERROR(HfConfig::load(dir.path()), "json.duplicate_key", "model_type");
}

}  // namespace
}  // namespace qlm::config
