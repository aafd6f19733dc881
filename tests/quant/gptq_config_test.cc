// GPTQ config parsing (FORMATS.md §2.3, RELIABILITY.md C3/C4/C9, B.5 items 16-17): strict types,
// supported values, v1/v2 convention, registry names.
#include <gtest/gtest.h>

#include <memory>

#include "io/json.h"
#include "quant/gptq/gptq_config.h"
#include "support/expect_error.h"

namespace qlm {
namespace {

io::JsonView json(const std::string& text) {
  auto doc = std::make_shared<const nlohmann::json>(io::parse_json_strict(text, "config.json"));
  return io::JsonView(doc, "config.json", "quantization_config");
}

std::unique_ptr<GptqConfig> parse(const std::string& fields) {
  return GptqConfig::from_json(json("{\"quant_method\": \"gptq\", " + fields + "}"));
}
const std::string kOk = R"("group_size": 128, "desc_act": false, "sym": true)";

TEST(GptqConfig, RegisteredUnderNameAndAliases) {
  for (const char* n : {"gptq", "gptq_marlin", "auto_gptq"}) {
    const QuantFormat* f = QuantRegistry::instance().find(n);
    ASSERT_NE(f, nullptr) << n;
    EXPECT_EQ(f->name, "gptq");
    EXPECT_EQ(f->family, "gptq");
  }
  auto cfg = QuantRegistry::instance().find("gptq")->from_config(json(R"({"bits": 4, )" + kOk + "}"));
  EXPECT_EQ(cfg->name(), "gptq");
  EXPECT_EQ(cfg->describe(), "gptq 4-bit g128 sym desc_act=false v1");
}

TEST(GptqConfig, AcceptsEveryBitWidthSymmetryAndFormat) {
  for (int bits : {2, 3, 4, 8})
    for (const char* sym : {"true", "false"})
      for (const char* fmt_name : {"gptq", "gptq_v2"}) {
        auto c = parse(fmt::format(R"("bits": {}, "group_size": 32, "desc_act": true, "sym": {}, "checkpoint_format": "{}")",
                                   bits, sym, fmt_name));
        EXPECT_EQ(c->base_scheme().bits, bits);
        EXPECT_EQ(c->base_scheme().symmetric, std::string(sym) == "true");
        EXPECT_TRUE(c->base_scheme().act_order);
        EXPECT_EQ(c->convention(), std::string(fmt_name) == "gptq" ? GptqZeroConvention::V1 : GptqZeroConvention::V2);
      }
  EXPECT_EQ(parse(R"("bits": 4, "format": "gptq_v2", )" + kOk)->convention(), GptqZeroConvention::V2);
  EXPECT_EQ(parse(R"("bits": 4, )" + kOk)->convention(), GptqZeroConvention::V1);
}

TEST(GptqConfig, DescActForcedOffWithOneGroup) {
  auto c = parse(R"("bits": 8, "group_size": -1, "desc_act": true, "sym": true)");
  EXPECT_FALSE(c->base_scheme().act_order);
  EXPECT_EQ(c->base_scheme().group_size, -1);
}

TEST(GptqConfig, BitsStrictTypeAndValue) {  // B.5 item 17
  EXPECT_QLM_ERROR(parse(R"("bits": 5, )" + kOk), "config.value", "one of 2, 3, 4, 8");
  EXPECT_QLM_ERROR(parse(R"("bits": 16, )" + kOk), "config.value", "quantization_config.bits");
  EXPECT_QLM_ERROR(parse(R"("bits": "4", )" + kOk), "config.type", "bits");
  EXPECT_QLM_ERROR(parse(R"("bits": 4.0, )" + kOk), "config.type", "bits");
  EXPECT_QLM_ERROR(parse(R"("bits": true, )" + kOk), "config.type", "bits");
  EXPECT_QLM_ERROR(parse(R"("group_size": 128, "desc_act": false, "sym": true)"), "config.missing_key", "bits");
}

TEST(GptqConfig, GroupSizeAndFlags) {
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "group_size": 0, "desc_act": false, "sym": true)"), "config.value",
                   "group_size");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "group_size": -2, "desc_act": false, "sym": true)"), "config.value",
                   "positive integer");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "group_size": "128", "desc_act": false, "sym": true)"), "config.type",
                   "group_size");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "group_size": 128, "desc_act": "true", "sym": true)"), "config.type",
                   "desc_act");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "group_size": 128, "desc_act": false, "sym": 1)"), "config.type", "sym");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "group_size": 128, "desc_act": false)"), "config.missing_key", "sym");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "lm_head": "yes", )" + kOk), "config.type", "lm_head");
}

TEST(GptqConfig, CheckpointFormat) {
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "checkpoint_format": "marlin", )" + kOk), "config.value",
                   "Marlin-serialized GPTQ checkpoints are not supported yet");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "checkpoint_format": "bitblas", )" + kOk), "config.value", "gptq or gptq_v2");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "checkpoint_format": 2, )" + kOk), "config.type", "checkpoint_format");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "checkpoint_format": "gptq", "format": "gptq_v2", )" + kOk), "config.value",
                   "make them agree");
}

TEST(GptqConfig, LmHeadOnlyWhenDeclared) {
  LayerInfo head{.kind = LayerInfo::Kind::LmHead, .prefix = "lm_head", .shard_prefixes = {}, .row_parallel = false};
  EXPECT_EQ(parse(R"("bits": 4, )" + kOk)->get_linear_method(head, {})->name(), "unquantized");
  EXPECT_EQ(parse(R"("bits": 4, "lm_head": true, )" + kOk)->get_linear_method(head, {})->name(), "gptq");
}

}  // namespace
}  // namespace qlm
