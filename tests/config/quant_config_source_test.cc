#include "config/quant_config_source.h"

#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qlm::config {
namespace {

using qlm::testing::TempDir;

std::string config_with_quant(const std::string& quantization_config) {
  return R"({"model_type": "llama", "hidden_size": 64, "quantization_config": )" + quantization_config + "}";
}

constexpr const char* kGptq =
    R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false, "sym": true})";

TEST(QuantConfigSource, NoneWhenUnquantized) {
  TempDir dir("qlm-qcs");
  dir.write("config.json", R"({"model_type": "llama"})");
  EXPECT_FALSE(find_quant_config(dir.path()));
  dir.write("config.json", R"({"model_type": "llama", "quantization_config": null})");
  EXPECT_FALSE(find_quant_config(dir.path()));
  TempDir empty("qlm-qcs-empty");
  EXPECT_FALSE(find_quant_config(empty.path()));
}

TEST(QuantConfigSource, ConfigJsonQuantizationConfig) {
  TempDir dir("qlm-qcs");
  dir.write("config.json", config_with_quant(kGptq));
  auto source = find_quant_config(dir.path());
  ASSERT_TRUE(source);
  EXPECT_EQ(source->quant_method, "gptq");
  EXPECT_EQ(source->origin(), "config.json: quantization_config");
  EXPECT_EQ(source->origins.size(), 1u);
  EXPECT_EQ(source->config.get_int("group_size"), 128);
  EXPECT_EQ(source->config.key_path("bits"), "quantization_config.bits");
  EXPECT_TRUE(source->warnings.empty());
}

TEST(QuantConfigSource, DoesNotValidateFormatFields) {
  TempDir dir("qlm-qcs");
  dir.write("config.json", config_with_quant(R"({"quant_method": "gptq", "bits": "four"})"));
  EXPECT_EQ(find_quant_config(dir.path())->config.at("bits"), "four");
}

TEST(QuantConfigSource, QuantMethodChecks) {
  TempDir dir("qlm-qcs");
  dir.write("config.json", config_with_quant(R"({"bits": 4})"));
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "config.missing_key",
                   "config.json: quantization_config: the quantization config has no quant_method");
  dir.write("config.json", config_with_quant(R"({"quant_method": 4})"));
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "config.type",
                   "quantization_config.quant_method: expected string, found integer 4");
  dir.write("config.json", config_with_quant(R"({"quant_method": ""})"));
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "config.value", "quant_method");
  dir.write("config.json", config_with_quant(R"(["gptq"])"));
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "config.type", "quantization_config: expected object");
}

TEST(QuantConfigSource, LegacyQuantizeConfigJson) {
  TempDir dir("qlm-qcs");
  dir.write("config.json", R"({"model_type": "llama"})");
  dir.write("quantize_config.json", kGptq);
  auto source = find_quant_config(dir.path());
  ASSERT_TRUE(source);
  EXPECT_EQ(source->quant_method, "gptq");
  EXPECT_EQ(source->origin(), "quantize_config.json");
  EXPECT_EQ(source->config.key_path("bits"), "bits");
}

TEST(QuantConfigSource, LegacyFileWithoutQuantMethodIsAnErrorWithAGuess) {
  TempDir dir("qlm-qcs");
  dir.write("quant_config.json", R"({"zero_point": true, "q_group_size": 128, "w_bit": 4, "version": "GEMM"})");
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "config.missing_key", R"(add "quant_method": "awq")");
  dir.write("quant_config.json", R"({"bits": 4, "group_size": 128, "desc_act": true})");
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "config.missing_key", R"(add "quant_method": "gptq")");
}

TEST(QuantConfigSource, AgreeingLegacyFileIsListed) {
  TempDir dir("qlm-qcs");
  dir.write("config.json", config_with_quant(kGptq));
  // AutoGPTQ's copy often lacks quant_method; shared fields agree.
  dir.write("quantize_config.json", R"({"bits": 4, "group_size": 128, "desc_act": false, "sym": true,
                                        "damp_percent": 0.01, "model_name_or_path": null})");
  auto source = find_quant_config(dir.path());
  ASSERT_TRUE(source);
  EXPECT_EQ(source->origin(), "config.json: quantization_config");
  EXPECT_EQ(source->origins, (std::vector<std::string>{"config.json: quantization_config", "quantize_config.json"}));
  EXPECT_TRUE(source->warnings.empty());
}

TEST(QuantConfigSource, ConflictNamesBothFilesAndValues) {
  TempDir dir("qlm-qcs");
  dir.write("config.json", config_with_quant(kGptq));
  dir.write("quantize_config.json", R"({"bits": 8, "group_size": 128})");
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "config.conflict",
                   "config.json: quantization_config.bits = 4 but quantize_config.json: bits = 8");
  dir.write("quantize_config.json", R"({"quant_method": "awq", "bits": 4})");
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "config.conflict", R"(quant_method = "gptq" but)");
}

TEST(QuantConfigSource, AutoAwqSpellingsAreCompared) {
  TempDir dir("qlm-qcs");
  dir.write("config.json", config_with_quant(
                               R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true,
                                   "version": "gemm"})"));
  dir.write("quant_config.json", R"({"zero_point": true, "q_group_size": 128, "w_bit": 4, "version": "GEMM"})");
  auto source = find_quant_config(dir.path());
  ASSERT_TRUE(source);
  EXPECT_EQ(source->origins.size(), 2u);
  dir.write("quant_config.json", R"({"zero_point": true, "q_group_size": 64, "w_bit": 4})");
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "config.conflict",
                   "quantization_config.group_size = 128 but quant_config.json: q_group_size = 64");
}

TEST(QuantConfigSource, UnrelatedLegacyFileIsAWarning) {
  TempDir dir("qlm-qcs");
  dir.write("config.json", config_with_quant(R"({"quant_method": "compressed-tensors", "config_groups": {}})"));
  dir.write("quantize_config.json", R"({"damp_percent": 0.1})");
  auto source = find_quant_config(dir.path());
  ASSERT_TRUE(source);
  ASSERT_EQ(source->warnings.size(), 1u);
  EXPECT_NE(source->warnings[0].find("quantize_config.json is present but shares no numerics field"),
            std::string::npos);
}

constexpr const char* kHfQuantConfig = R"({
  "producer": {"name": "modelopt", "version": "0.19.0"},
  "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}})";

TEST(QuantConfigSource, ModelOptLegacyFile) {
  TempDir dir("qlm-qcs");
  dir.write("config.json", R"({"model_type": "llama"})");
  dir.write("hf_quant_config.json", kHfQuantConfig);
  auto source = find_quant_config(dir.path());
  ASSERT_TRUE(source);
  EXPECT_EQ(source->quant_method, "modelopt");
  EXPECT_EQ(source->origin(), "hf_quant_config.json");
  EXPECT_EQ(source->config.get_string("quant_method"), "modelopt");
  EXPECT_EQ(source->config.get_object("quantization").get_string("quant_algo"), "FP8");
}

TEST(QuantConfigSource, ModelOptLegacyFileVersusConfigJson) {
  TempDir dir("qlm-qcs");
  dir.write("hf_quant_config.json", kHfQuantConfig);
  dir.write("config.json", config_with_quant(R"({"quant_method": "modelopt", "quant_algo": "fp8"})"));
  auto source = find_quant_config(dir.path());
  ASSERT_TRUE(source);
  EXPECT_EQ(source->origin(), "config.json: quantization_config");
  EXPECT_EQ(source->origins.back(), "hf_quant_config.json");
  dir.write("config.json", config_with_quant(R"({"quant_method": "modelopt", "quant_algo": "NVFP4"})"));
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "config.conflict",
                   R"(quantization_config.quant_algo = "NVFP4" but hf_quant_config.json: quantization.quant_algo = "FP8")");
  dir.write("config.json", config_with_quant(R"({"quant_method": "fp8", "activation_scheme": "static"})"));
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "config.conflict", R"(quant_method = "fp8" but)");
}

TEST(QuantConfigSource, ModelOptFileFromAnotherProducer) {
  TempDir dir("qlm-qcs");
  dir.write("hf_quant_config.json", R"({"producer": {"name": "other"}, "quantization": {"quant_algo": "FP8"}})");
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "config.value", "producer.name");
  dir.write("hf_quant_config.json", R"({"producer": {"name": "modelopt"}})");
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "config.missing_key", "quantization");
}

TEST(QuantConfigSource, CompressionConfigAndTextConfig) {
  TempDir dir("qlm-qcs");
  dir.write("config.json", R"({"compression_config": {"quant_method": "compressed-tensors", "format": "pack-quantized"}})");
  auto source = find_quant_config(dir.path());
  ASSERT_TRUE(source);
  EXPECT_EQ(source->origin(), "config.json: compression_config");
  EXPECT_EQ(source->quant_method, "compressed-tensors");
  dir.write("config.json", R"({"text_config": {"quantization_config": {"quant_method": "fp8"}}})");
  EXPECT_EQ(find_quant_config(dir.path())->origin(), "config.json: text_config.quantization_config");
}

TEST(QuantConfigSource, MalformedFilesAreErrors) {
  TempDir dir("qlm-qcs");
  dir.write("quantize_config.json", R"({"bits": 4, "bits": 8})");
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "json.duplicate_key", "quantize_config.json");
  dir.write("quantize_config.json", "[4]");
  EXPECT_QLM_ERROR(find_quant_config(dir.path()), "json.type", "quantize_config.json");
}

TEST(QuantConfigSource, QuantizedTensorNames) {
  const std::vector<std::string> names = {
      "model.layers.0.self_attn.q_proj.qweight",       "model.layers.0.self_attn.q_proj.scales",
      "model.layers.0.mlp.down_proj.weight_packed",    "model.layers.0.mlp.up_proj.weight_scale",
      "model.layers.0.mlp.gate_proj.weight_scale_inv", "model.embed_tokens.weight",
      "model.norm.weight",                             "lm_head.weight.absmax"};
  EXPECT_EQ(quantized_tensor_names(names),
            (std::vector<std::string>{"model.layers.0.self_attn.q_proj.qweight",
                                      "model.layers.0.mlp.down_proj.weight_packed",
                                      "model.layers.0.mlp.up_proj.weight_scale",
                                      "model.layers.0.mlp.gate_proj.weight_scale_inv", "lm_head.weight.absmax"}));
}

TEST(QuantConfigSource, MissingQuantizationWithPackedTensors) {
  TempDir dir("qlm-qcs");
  const std::vector<std::string> packed = {"a.qweight", "b.qweight", "c.qweight", "d.qweight", "e.weight"};
  EXPECT_QLM_ERROR(check_quantized_tensors_have_config(std::nullopt, packed, dir.path()),
                   "config.missing_quantization", "4 tensors look quantized (a.qweight, b.qweight, c.qweight, ...)");
  EXPECT_NO_THROW(check_quantized_tensors_have_config(std::nullopt, {"e.weight", "lm_head.weight"}, dir.path()));
  dir.write("config.json", config_with_quant(kGptq));
  EXPECT_NO_THROW(check_quantized_tensors_have_config(find_quant_config(dir.path()), packed, dir.path()));
}

}  // namespace
}  // namespace qlm::config
