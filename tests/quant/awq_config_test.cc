// AWQ config parsing (FORMATS.md §2.4, RELIABILITY.md C3/C4): both key spellings, 4-bit GEMM with
// zero points only, everything else rejected naming the field.
#include <gtest/gtest.h>

#include <memory>

#include "io/json.h"
#include "quant/awq/awq_config.h"
#include "support/expect_error.h"

namespace qlm {
namespace {

io::JsonView json(const std::string& text) {
  auto doc = std::make_shared<const nlohmann::json>(io::parse_json_strict(text, "config.json"));
  return io::JsonView(doc, "config.json", "quantization_config");
}
std::unique_ptr<AwqConfig> parse(const std::string& fields) {
  return AwqConfig::from_json(json("{\"quant_method\": \"awq\", " + fields + "}"));
}

TEST(AwqConfig, RegisteredWithAlias) {
  for (const char* n : {"awq", "awq_marlin"}) {
    const QuantFormat* f = QuantRegistry::instance().find(n);
    ASSERT_NE(f, nullptr) << n;
    EXPECT_EQ(f->name, "awq");
    EXPECT_EQ(f->family, "awq");
  }
}

TEST(AwqConfig, BothSpellings) {
  auto a = parse(R"("bits": 4, "group_size": 128, "zero_point": true, "version": "gemm")");
  EXPECT_EQ(a->scheme().group_size, 128);
  EXPECT_FALSE(a->scheme().symmetric);
  auto b = parse(R"("w_bit": 4, "q_group_size": 64, "zero_point": true, "version": "GEMM")");
  EXPECT_EQ(b->scheme().group_size, 64);
  EXPECT_EQ(b->describe(), "awq 4-bit g64 zero_point gemm");
  EXPECT_EQ(parse(R"("bits": 4, "group_size": -1, "zero_point": true)")->scheme().group_size, -1);
}

TEST(AwqConfig, Errors) {
  EXPECT_QLM_ERROR(parse(R"("bits": 8, "group_size": 128, "zero_point": true)"), "config.value",
                   "8-bit AWQ checkpoints are not supported yet");
  EXPECT_QLM_ERROR(parse(R"("w_bit": 3, "group_size": 128, "zero_point": true)"), "config.value", "w_bit");
  EXPECT_QLM_ERROR(parse(R"("bits": "4", "group_size": 128, "zero_point": true)"), "config.type", "bits");
  EXPECT_QLM_ERROR(parse(R"("bits": 4.0, "group_size": 128, "zero_point": true)"), "config.type", "bits");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "group_size": 0, "zero_point": true)"), "config.value", "group_size");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "q_group_size": -2, "zero_point": true)"), "config.value", "q_group_size");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "group_size": 128)"), "config.missing_key", "zero_point");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "group_size": 128, "zero_point": "true")"), "config.type", "zero_point");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "group_size": 128, "zero_point": false)"), "config.value",
                   "zero_point=false");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "group_size": 128, "zero_point": true, "version": "gemv")"), "config.value",
                   "AWQ 'gemv' checkpoints");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "group_size": 128, "zero_point": true, "version": "gemv_fast")"),
                   "config.value", "gemv_fast");
  EXPECT_QLM_ERROR(parse(R"("bits": 4, "group_size": 128, "zero_point": true, "modules_to_not_convert": "lm_head")"),
                   "config.type", "modules_to_not_convert");
}

}  // namespace
}  // namespace qlm
