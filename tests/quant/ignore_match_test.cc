// Ignore/target/dynamic matching (FORMATS.md §1.5, RELIABILITY.md C6/C7, B.5 item 19): the four
// spellings, fused-layer uniformity, unmatched-pattern tracking and invalid regexes.
#include <gtest/gtest.h>

#include <memory>

#include "io/json.h"
#include "quant/awq/awq_config.h"
#include "quant/compressed_tensors/ct_config.h"
#include "quant/gptq/gptq_config.h"
#include "quant/ignore_match.h"
#include "support/expect_error.h"

namespace qlm {
namespace {

io::JsonView json(const std::string& text) {
  auto doc = std::make_shared<const nlohmann::json>(io::parse_json_strict(text, "config.json"));
  return io::JsonView(doc, "config.json", "quantization_config");
}

LayerInfo qkv(int layer = 0) {
  const std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
  return LayerInfo{.kind = LayerInfo::Kind::Linear,
                   .prefix = p + "qkv_proj",
                   .shard_prefixes = {p + "q_proj", p + "k_proj", p + "v_proj"},
                   .row_parallel = false};
}
LayerInfo plain(const std::string& prefix, LayerInfo::Kind kind = LayerInfo::Kind::Linear) {
  return LayerInfo{.kind = kind, .prefix = prefix, .shard_prefixes = {}, .row_parallel = false};
}

TEST(IgnoreMatch, Substring) {
  PatternList l({"visual", "mlp.gate"}, PatternSpelling::Substring, "modules_to_not_convert");
  EXPECT_TRUE(l.matches("model.visual.blocks.0.attn.qkv"));
  EXPECT_TRUE(l.matches("model.layers.3.mlp.gate_proj"));
  EXPECT_FALSE(l.matches("model.layers.3.mlp.up_proj"));
  EXPECT_TRUE(l.unmatched().empty());
}

TEST(IgnoreMatch, Exact) {
  PatternList l({"lm_head", "model.layers.0.mlp.down_proj"}, PatternSpelling::Exact, "ignored_layers");
  EXPECT_TRUE(l.matches("lm_head"));
  EXPECT_FALSE(l.matches("model.lm_head"));
  EXPECT_FALSE(l.matches("model.layers.0.mlp.down_proj.x"));
  EXPECT_EQ(l.unmatched(), std::vector<std::string>{"ignored_layers: model.layers.0.mlp.down_proj"});
}

TEST(IgnoreMatch, ExactOrRegexIsFullMatch) {
  PatternList l({"lm_head", "re:.*mlp\\.gate$", "re:model\\.layers\\.1\\."}, PatternSpelling::ExactOrRegex, "ignore");
  EXPECT_TRUE(l.matches("lm_head"));
  EXPECT_TRUE(l.matches("model.layers.5.mlp.gate"));
  EXPECT_FALSE(l.matches("model.layers.5.mlp.gate_proj"));
  // Full match: a regex matching only a prefix of the name does not match (RELIABILITY A23).
  EXPECT_FALSE(l.matches("model.layers.1.mlp.up_proj"));
  EXPECT_EQ(l.unmatched(), std::vector<std::string>{"ignore: re:model\\.layers\\.1\\."});
}

TEST(IgnoreMatch, RegexPrefixIsPythonReMatch) {
  PatternList l({"model\\.layers\\.[0-3]\\.", ".*down_proj"}, PatternSpelling::RegexPrefix, "dynamic");
  EXPECT_EQ(l.first_match("model.layers.2.mlp.up_proj"), std::optional<size_t>(0));  // anchored at start only
  EXPECT_FALSE(l.matches("x.model.layers.2.mlp.up_proj"));                           // not a search
  EXPECT_EQ(l.first_match("model.layers.9.mlp.down_proj"), std::optional<size_t>(1));
  EXPECT_EQ(l.all_matches("model.layers.1.mlp.down_proj"), (std::vector<size_t>{0, 1}));
}

TEST(IgnoreMatch, InvalidRegexNamesPattern) {
  EXPECT_QLM_ERROR(PatternList({"re:model.(layers"}, PatternSpelling::ExactOrRegex, "quantization_config.ignore"),
                   "config.regex", "model.(layers");
  EXPECT_QLM_ERROR(PatternList({"[a-"}, PatternSpelling::RegexPrefix, "dynamic"), "config.regex", "dynamic");
  // Exact spellings never compile their entries.
  EXPECT_NO_THROW(PatternList({"(("}, PatternSpelling::Exact, "ignored_layers"));
}

TEST(IgnoreMatch, FusedMismatchListsEveryMember) {
  std::function<bool(const std::string&)> quantized = [](const std::string& n) { return n.find("k_proj") == n.npos; };
  std::function<std::string(const bool&)> describe = [](const bool& q) { return q ? "int4" : "unquantized"; };
  EXPECT_QLM_ERROR(resolve_fused_scheme(qkv(), quantized, describe), "config.fused_mismatch",
                   "model.layers.0.self_attn.k_proj: unquantized");
  EXPECT_TRUE(resolve_fused_scheme(plain("model.layers.0.self_attn.q_proj"), quantized, describe));
}

TEST(IgnoreMatch, CompressedTensorsIgnoreSplittingQkvIsAnError) {
  auto cfg = CompressedTensorsConfig::from_json(json(R"({
    "quant_method": "compressed-tensors", "format": "pack-quantized",
    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int",
      "symmetric": true, "strategy": "group", "group_size": 128}}},
    "ignore": ["lm_head", "model.layers.0.self_attn.v_proj", "re:.*never_matches.*"]})"));
  QuantContext ctx;
  EXPECT_QLM_ERROR(cfg->get_linear_method(qkv(0), ctx), "config.fused_mismatch",
                   "model.layers.0.self_attn.v_proj: unquantized");
  EXPECT_EQ(cfg->get_linear_method(qkv(1), ctx)->name(), "compressed-tensors");
  EXPECT_EQ(cfg->get_linear_method(plain("lm_head", LayerInfo::Kind::LmHead), ctx)->name(), "unquantized");
  EXPECT_EQ(cfg->unmatched_ignore_patterns(), std::vector<std::string>{"quantization_config.ignore: re:.*never_matches.*"});
}

TEST(IgnoreMatch, CompressedTensorsTargetsByNameRegexAndClass) {
  auto cfg = CompressedTensorsConfig::from_json(json(R"({
    "quant_method": "compressed-tensors", "format": "pack-quantized",
    "config_groups": {
      "group_0": {"targets": ["re:.*mlp\\.down_proj$"], "weights": {"num_bits": 8, "symmetric": true,
                  "strategy": "channel"}},
      "group_1": {"targets": ["Linear", "model.layers.7.mlp.gate_proj"], "weights": {"num_bits": 4,
                  "symmetric": false, "strategy": "group", "group_size": 32}}},
    "ignore": []})"));
  auto down = cfg->scheme_for("model.layers.0.mlp.down_proj", LayerInfo::Kind::Linear);
  ASSERT_TRUE(down);
  EXPECT_EQ(down->bits, 8);
  auto up = cfg->scheme_for("model.layers.0.mlp.up_proj", LayerInfo::Kind::Linear);
  ASSERT_TRUE(up);
  EXPECT_EQ(up->bits, 4);
  EXPECT_FALSE(up->symmetric);
  EXPECT_FALSE(cfg->scheme_for("lm_head", LayerInfo::Kind::LmHead));  // class "Linear" does not cover the LM head
  EXPECT_EQ(cfg->unmatched_ignore_patterns(),
            std::vector<std::string>{"group_1.targets: model.layers.7.mlp.gate_proj"});
}

TEST(IgnoreMatch, AwqModulesToNotConvertIsSubstring) {
  auto cfg = AwqConfig::from_json(json(R"({"quant_method": "awq", "bits": 4, "group_size": 128,
    "zero_point": true, "version": "gemm", "modules_to_not_convert": ["visual", "mlp.shared_expert", "nothing"]})"));
  QuantContext ctx;
  EXPECT_EQ(cfg->get_linear_method(plain("model.visual.proj"), ctx)->name(), "unquantized");
  EXPECT_EQ(cfg->get_linear_method(plain("model.layers.0.mlp.shared_expert.down_proj"), ctx)->name(), "unquantized");
  EXPECT_EQ(cfg->get_linear_method(plain("model.layers.0.mlp.down_proj"), ctx)->name(), "awq");
  EXPECT_EQ(cfg->get_linear_method(plain("lm_head", LayerInfo::Kind::LmHead), ctx)->name(), "unquantized");
  EXPECT_EQ(cfg->unmatched_ignore_patterns(), std::vector<std::string>{"quantization_config.modules_to_not_convert: nothing"});
}

TEST(IgnoreMatch, GptqDynamicOverridesAndSkips) {
  auto cfg = GptqConfig::from_json(json(R"({"quant_method": "gptq", "bits": 4, "group_size": 128,
    "desc_act": false, "sym": true,
    "dynamic": {"-:.*\\.layers\\.0\\.": {}, "+:.*\\.layers\\.1\\..*mlp": {"bits": 8, "group_size": 32},
                ".*\\.layers\\.2\\.": {"desc_act": true, "sym": false}, "-:.*nowhere": {}}})"));
  EXPECT_FALSE(cfg->scheme_for("model.layers.0.mlp.up_proj", LayerInfo::Kind::Linear));
  auto s1 = cfg->scheme_for("model.layers.1.mlp.up_proj", LayerInfo::Kind::Linear);
  ASSERT_TRUE(s1);
  EXPECT_EQ(s1->bits, 8);
  EXPECT_EQ(s1->group_size, 32);
  auto s1a = cfg->scheme_for("model.layers.1.self_attn.q_proj", LayerInfo::Kind::Linear);
  EXPECT_EQ(s1a, cfg->base_scheme());
  auto s2 = cfg->scheme_for("model.layers.2.self_attn.q_proj", LayerInfo::Kind::Linear);
  ASSERT_TRUE(s2);
  EXPECT_TRUE(s2->act_order);
  EXPECT_FALSE(s2->symmetric);
  QuantContext ctx;
  EXPECT_EQ(cfg->get_linear_method(qkv(0), ctx)->name(), "unquantized");
  EXPECT_EQ(cfg->get_linear_method(qkv(3), ctx)->name(), "gptq");
  EXPECT_EQ(cfg->unmatched_ignore_patterns(), std::vector<std::string>{"quantization_config.dynamic: .*nowhere"});
}

TEST(IgnoreMatch, GptqDynamicSplittingFusedLayerIsAnError) {
  auto cfg = GptqConfig::from_json(json(R"({"bits": 4, "group_size": 128, "desc_act": false, "sym": true,
    "dynamic": {"-:.*k_proj": {}}})"));
  EXPECT_QLM_ERROR(cfg->get_linear_method(qkv(0), QuantContext{}), "config.fused_mismatch",
                   "model.layers.0.self_attn.k_proj: unquantized");
}

TEST(IgnoreMatch, GptqDynamicAmbiguousOverlap) {
  auto cfg = GptqConfig::from_json(json(R"({"bits": 4, "group_size": 128, "desc_act": false, "sym": true,
    "dynamic": {".*mlp.*": {"bits": 8}, ".*layers\\.3\\..*": {"bits": 2}}})"));
  EXPECT_QLM_ERROR(cfg->scheme_for("model.layers.3.mlp.up_proj", LayerInfo::Kind::Linear), "config.dynamic_ambiguous",
                   "model.layers.3.mlp.up_proj");
}

TEST(IgnoreMatch, GptqDynamicInvalidRegexAndOverrideValues) {
  EXPECT_QLM_ERROR(GptqConfig::from_json(json(R"({"bits": 4, "group_size": 128, "desc_act": false, "sym": true,
    "dynamic": {"+:model.(": {"bits": 8}}})")),
                   "config.regex", "model.(");
  EXPECT_QLM_ERROR(GptqConfig::from_json(json(R"({"bits": 4, "group_size": 128, "desc_act": false, "sym": true,
    "dynamic": {".*": {"bits": 5}}})")),
                   "config.value", "bits");
  EXPECT_QLM_ERROR(GptqConfig::from_json(json(R"({"bits": 4, "group_size": 128, "desc_act": false, "sym": true,
    "dynamic": {".*": {"bits": "8"}}})")),
                   "config.type", "bits");
  EXPECT_QLM_ERROR(GptqConfig::from_json(json(R"({"bits": 4, "group_size": 128, "desc_act": false, "sym": true,
    "dynamic": {".*": {"zero_point_dtype": 1}}})")),
                   "config.unknown_key", "zero_point_dtype");
}

TEST(IgnoreMatch, GptqModulesInBlockToQuantizeListOfLists) {
  auto cfg = GptqConfig::from_json(json(R"({"bits": 4, "group_size": 128, "desc_act": false, "sym": true,
    "lm_head": false,
    "modules_in_block_to_quantize": [["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
                                     ["mlp.down_proj"], ["mlp.router"]]})"));
  QuantContext ctx;
  EXPECT_EQ(cfg->get_linear_method(qkv(0), ctx)->name(), "gptq");
  EXPECT_EQ(cfg->get_linear_method(plain("model.layers.0.mlp.down_proj"), ctx)->name(), "gptq");
  EXPECT_EQ(cfg->get_linear_method(plain("model.layers.0.mlp.up_proj"), ctx)->name(), "unquantized");
  EXPECT_EQ(cfg->unmatched_ignore_patterns(),
            std::vector<std::string>{"quantization_config.modules_in_block_to_quantize: mlp.router"});
  EXPECT_QLM_ERROR(GptqConfig::from_json(json(R"({"bits": 4, "group_size": 128, "desc_act": false, "sym": true,
    "modules_in_block_to_quantize": [["a", 3]]})")),
                   "config.value", "modules_in_block_to_quantize");
}

}  // namespace
}  // namespace qlm
