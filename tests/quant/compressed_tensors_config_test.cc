// compressed-tensors config parsing (FORMATS.md §2.6, RELIABILITY.md C5, B.5 item 18): strict
// QuantizationArgs, its validators, and every non-WNA16 scheme rejected naming it.
#include <gtest/gtest.h>

#include <memory>

#include "io/json.h"
#include "quant/compressed_tensors/ct_config.h"
#include "support/expect_error.h"

namespace qlm {
namespace {

io::JsonView json(const std::string& text) {
  auto doc = std::make_shared<const nlohmann::json>(io::parse_json_strict(text, "config.json"));
  return io::JsonView(doc, "config.json", "quantization_config");
}

// One config group targeting Linear with `weights` (and optional extra group fields).
std::unique_ptr<CompressedTensorsConfig> parse(const std::string& weights, const std::string& format = "pack-quantized",
                                               const std::string& extra = "") {
  return CompressedTensorsConfig::from_json(json(fmt::format(
      R"({{"quant_method": "compressed-tensors", "format": "{}", "ignore": ["lm_head"],
          "config_groups": {{"group_0": {{"targets": ["Linear"], "weights": {}{}}}}}}})",
      format, weights, extra)));
}

TEST(CompressedTensorsConfig, Registered) {
  const QuantFormat* f = QuantRegistry::instance().find("compressed-tensors");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->family, "compressed-tensors");
}

TEST(CompressedTensorsConfig, WNA16Variants) {
  // A real llm-compressor W4A16 group-128 config.
  auto c = parse(R"({"actorder": null, "block_structure": null, "dynamic": false, "group_size": 128,
                     "num_bits": 4, "observer": "minmax", "observer_kwargs": {}, "strategy": "group",
                     "symmetric": true, "type": "int"})");
  auto s = c->scheme_for("model.layers.0.mlp.up_proj", LayerInfo::Kind::Linear);
  ASSERT_TRUE(s);
  EXPECT_EQ(*s, (WNA16Scheme{.bits = 4, .symmetric = true, .group_size = 128, .act_order = false}));
  // Strategy inferred from group_size; channel; asymmetric 8-bit; actorder aliases.
  EXPECT_EQ(parse(R"({"num_bits": 4, "group_size": 64})")->scheme_for("x", LayerInfo::Kind::Linear)->group_size, 64);
  EXPECT_EQ(parse(R"({"num_bits": 8, "group_size": -1, "symmetric": false})")
                ->scheme_for("x", LayerInfo::Kind::Linear),
            (WNA16Scheme{.bits = 8, .symmetric = false, .group_size = -1, .act_order = false}));
  for (const char* ao : {"\"group\"", "\"dynamic\"", "true"})
    EXPECT_TRUE(parse(fmt::format(R"({{"num_bits": 4, "strategy": "group", "group_size": 32, "actorder": {}}})", ao))
                    ->scheme_for("x", LayerInfo::Kind::Linear)
                    ->act_order)
        << ao;
  for (const char* ao : {"\"weight\"", "\"static\"", "false", "null"})
    EXPECT_FALSE(parse(fmt::format(R"({{"num_bits": 4, "strategy": "group", "group_size": 32, "actorder": {}}})", ao))
                     ->scheme_for("x", LayerInfo::Kind::Linear)
                     ->act_order)
        << ao;
}

TEST(CompressedTensorsConfig, QuantArgsValidators) {  // B.5 item 18
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 4, "group_size": 128, "strategy": "group", "colour": "red"})"),
                   "config.unknown_key", "colour");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 4, "strategy": "group"})"), "config.value", "group_size > 0");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 4, "strategy": "channel", "group_size": 128})"), "config.value",
                   "requires strategy group");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 8, "strategy": "token"})"), "config.value", "must be dynamic");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 8, "type": "float", "strategy": "block"})"), "config.value",
                   "block_structure");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 4, "strategy": "channel", "actorder": "group"})"), "config.value",
                   "actorder group requires strategy group");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 4, "type": "float", "strategy": "channel"})", "float-quantized"),
                   "config.unsupported_scheme", "float4");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 6, "type": "float", "strategy": "channel"})"), "config.value",
                   "for type float");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 4, "group_size": 128, "actorder": "sometimes"})"), "config.value",
                   "actorder");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": "4", "group_size": 128})"), "config.type", "num_bits");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 4, "group_size": 128, "symmetric": "true"})"), "config.type", "symmetric");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 4, "group_size": 0})"), "config.value", "group_size");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 4, "strategy": "rows"})"), "config.value", "strategy");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 4, "group_size": 128})", "packed-ish"), "config.value", "format");
}

TEST(CompressedTensorsConfig, OtherSchemesNotSupportedYet) {
  // FP8/INT8 W8A8 schemes (float-/int-quantized), the fp8 KV cache (src/quant/w8a8_method.*) and float4
  // weight-only NVFP4A16 / MXFP4A16 (src/quant/fp4_method.*) load; what is still unsupported is rejected
  // naming the scheme.
  EXPECT_QLM_ERROR(
      parse(R"({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16})", "nvfp4-pack-quantized",
            R"(, "input_activations": {"num_bits": 4, "type": "float", "strategy": "tensor_group",
                               "group_size": 16, "dynamic": "local"})"),
      "config.unsupported_scheme", "NVFP4 W4A4");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 8, "strategy": "channel"})", "naive-quantized"), "config.unsupported_scheme",
                   "naive-quantized");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 2, "group_size": 128})"), "config.unsupported_scheme", "4 or 8 bits");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 4, "strategy": "tensor"})"), "config.unsupported_scheme",
                   "strategy group or channel");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 4, "group_size": 128})", "pack-quantized",
                         R"(, "input_activations": {"num_bits": 8, "strategy": "token", "dynamic": true})"),
                   "config.unsupported_scheme", "input activations");
  EXPECT_QLM_ERROR(CompressedTensorsConfig::from_json(json(R"({"format": "pack-quantized",
      "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "group_size": 128}}},
      "sparsity_config": {"format": "sparse-24-bitmask", "sparsity_structure": "2:4"}})")),
                   "config.unsupported_scheme", "sparse-24-bitmask");
  EXPECT_QLM_ERROR(CompressedTensorsConfig::from_json(json(R"({"format": "pack-quantized",
      "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "group_size": 128}}},
      "kv_cache_scheme": {"num_bits": 4, "type": "int", "strategy": "tensor"}})")),
                   "config.unsupported_scheme", "kv_cache_scheme");
  EXPECT_QLM_ERROR(parse(R"({"num_bits": 4, "group_size": 128})", "pack-quantized", R"(, "sparsity": 0.5)"),
                   "config.unknown_key", "sparsity");
}

TEST(CompressedTensorsConfig, TargetsAndIgnoreTypes) {
  EXPECT_QLM_ERROR(CompressedTensorsConfig::from_json(json(R"({"format": "pack-quantized",
      "config_groups": {"g": {"targets": "Linear", "weights": {"num_bits": 4, "group_size": 128}}}})")),
                   "config.type", "targets");
  EXPECT_QLM_ERROR(CompressedTensorsConfig::from_json(json(R"({"format": "pack-quantized", "ignore": ["re:(("],
      "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "group_size": 128}}}})")),
                   "config.regex", "((");
}

}  // namespace
}  // namespace qlm
