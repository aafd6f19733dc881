// One integer matrix written as GPTQ (v1, v2), AWQ and compressed-tensors converts to bit-identical
// standard forms; and the load-time value checks (RELIABILITY.md T1-T5, B.5 items 17, 20-23).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "quant/packing.h"
#include "quant/wna16_method.h"
#include "support/expect_error.h"
#include "support/quantize_ref.h"

namespace qlm::testing {
namespace {

constexpr int64_t kK = 96, kN = 48;

// Every code and every zero point value appears; scales are exact in f16.
IntQuant hand_built(int bits, int64_t group, bool sym, bool act_order) {
  IntQuant q;
  q.bits = bits;
  q.K = kK;
  q.N = kN;
  q.group_size = group;
  q.num_groups = kK / group;
  q.symmetric = sym;
  q.act_order = act_order;
  const int n = 1 << bits;
  for (int64_t k = 0; k < kK; ++k)
    for (int64_t c = 0; c < kN; ++c) q.codes.push_back(static_cast<uint8_t>((k * 5 + c * 3 + k * c) % n));
  for (int64_t g = 0; g < q.num_groups; ++g)
    for (int64_t c = 0; c < kN; ++c) {
      q.zeros.push_back(sym ? n / 2 : static_cast<int32_t>(1 + (g * 7 + c) % (n - 1)));  // 1..n-1: v1-safe
      q.scales.push_back(0.0078125f * static_cast<float>(1 + (g + c) % 13));
    }
  for (int64_t k = 0; k < kK; ++k)
    q.g_idx.push_back(static_cast<int32_t>(act_order ? ((k * 37) % kK) / group : k / group));
  return q;
}

std::string gptq_json(int bits, int64_t group, bool sym, bool ao, const char* format) {
  return fmt::format(R"({{"quant_method": "gptq", "bits": {}, "group_size": {}, "desc_act": {}, "sym": {},
                         "checkpoint_format": "{}"}})",
                     bits, group, ao, sym, format);
}
std::string ct_json(int bits, int64_t group, bool sym, bool ao) {
  return fmt::format(R"({{"quant_method": "compressed-tensors", "format": "pack-quantized",
      "config_groups": {{"g": {{"targets": ["Linear"], "weights": {{"num_bits": {}, "symmetric": {},
      "strategy": "group", "group_size": {}, "actorder": {}}}}}}}}})",
                     bits, sym, group, ao ? "\"group\"" : "null");
}
const std::string kAwqJson = R"({"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": true})";

LinearSpec column_spec() {
  LinearSpec s;
  s.prefix = "model.layers.0.mlp.up_proj";
  s.kind = LinearKind::Column;
  s.input_size = kK;
  s.output_size = kN;
  return s;
}

// Loads `tensors` into a TP=1 column layer and returns the standard form handed to the kernel.
WNA16Weights standard_form(const std::string& json, const CheckpointTensors& tensors,
                           const std::vector<std::string>& skip = {}) {
  auto config = make_quant_config(json);
  LayerFixture f{.config = config.get(), .spec = column_spec(), .backend = "cpu_ref"};
  auto layer = build_layer(f, {tensors}, TpContext{}, skip, [](LinearLayer& l) {
    dynamic_cast<WNA16LinearMethod&>(l.method()).keep_standard_form(true);
  });
  return *dynamic_cast<WNA16LinearMethod&>(layer->method()).standard_form();
}

void load(const std::string& json, const CheckpointTensors& tensors, LinearSpec spec = column_spec()) {
  auto config = make_quant_config(json);
  LayerFixture f{.config = config.get(), .spec = std::move(spec), .backend = "cpu_ref"};
  build_layer(f, {tensors}, TpContext{});
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.contiguous().raw_data(), b.contiguous().raw_data(), a.nbytes()) == 0;
}

void expect_identical(const WNA16Weights& a, const WNA16Weights& b, const std::string& what) {
  EXPECT_EQ(a.weight_type, b.weight_type) << what;
  EXPECT_EQ(a.group_size, b.group_size) << what;
  EXPECT_TRUE(same_bytes(a.qweight, b.qweight)) << what << " qweight";
  EXPECT_TRUE(same_bytes(a.scales, b.scales)) << what << " scales";
  EXPECT_TRUE(same_bytes(a.zeros, b.zeros)) << what << " zeros";
  EXPECT_TRUE(same_bytes(a.g_idx, b.g_idx)) << what << " g_idx";
}

// A fused-MoE kernel that holds the experts itself gets only the standard form: the same one a
// kept form gives, and no kernel of the layer's own (running the layer alone is refused).
TEST(WNA16StandardForm, StandardFormOnlyKeepsTheFormAndBuildsNoKernel) {
  const IntQuant q = hand_built(4, 32, /*sym=*/false, /*act_order=*/true);
  const std::string json = gptq_json(4, 32, false, true, "gptq");
  const WNA16Weights kept = standard_form(json, encode_gptq(q, GptqFormat::V1));
  auto config = make_quant_config(json);
  LayerFixture f{.config = config.get(), .spec = column_spec(), .backend = "cpu_ref"};
  auto layer = build_layer(f, {encode_gptq(q, GptqFormat::V1)}, TpContext{}, {}, [](LinearLayer& l) {
    dynamic_cast<WNA16LinearMethod&>(l.method()).standard_form_only(true);
  });
  auto& method = dynamic_cast<WNA16LinearMethod&>(layer->method());
  ASSERT_TRUE(method.standard_form().has_value());
  expect_identical(*method.standard_form(), kept, "standard form only vs kept");
  EXPECT_QLM_ERROR(layer->forward(Tensor::zeros({1, kK}, DType::F32)), "quant.moe_expert",
                   "up_proj is an expert projection");
  method.release_standard_form();
  EXPECT_FALSE(method.standard_form().has_value());
}

TEST(WNA16StandardForm, AsymmetricFourBitAllFormatsBitIdentical) {
  const IntQuant q = hand_built(4, 32, /*sym=*/false, /*act_order=*/false);
  const WNA16Weights v1 = standard_form(gptq_json(4, 32, false, false, "gptq"), encode_gptq(q, GptqFormat::V1));
  const WNA16Weights v2 = standard_form(gptq_json(4, 32, false, false, "gptq_v2"), encode_gptq(q, GptqFormat::V2));
  const WNA16Weights awq = standard_form(kAwqJson, encode_awq(q));
  const WNA16Weights ct = standard_form(ct_json(4, 32, false, false), encode_ct(q, false));
  expect_identical(v1, v2, "gptq v1 vs v2");
  expect_identical(v1, awq, "gptq vs awq");
  expect_identical(v1, ct, "gptq vs compressed-tensors");
  // And the standard form holds exactly the integers we started from.
  EXPECT_EQ(unpack_rows(v1.qweight, kK, 4), q.codes);
  EXPECT_EQ(std::vector<int32_t>(v1.zeros.span<int32_t>().begin(), v1.zeros.span<int32_t>().end()), q.zeros);
  EXPECT_EQ(v1.weight_type, kUint4);
}

TEST(WNA16StandardForm, SymmetricAndActOrderGptqMatchesCompressedTensors) {
  for (int bits : {4, 8})
    for (bool ao : {false, true}) {
      const IntQuant q = hand_built(bits, 32, /*sym=*/true, ao);
      const WNA16Weights v1 = standard_form(gptq_json(bits, 32, true, ao, "gptq"), encode_gptq(q, GptqFormat::V1));
      const WNA16Weights v2 = standard_form(gptq_json(bits, 32, true, ao, "gptq_v2"), encode_gptq(q, GptqFormat::V2));
      const WNA16Weights ct = standard_form(ct_json(bits, 32, true, ao), encode_ct(q, ao));
      expect_identical(v1, v2, fmt::format("{}-bit ao={} v1 vs v2", bits, ao));
      expect_identical(v1, ct, fmt::format("{}-bit ao={} gptq vs ct", bits, ao));
      EXPECT_FALSE(v1.zeros.defined());
      EXPECT_EQ(v1.weight_type, (PackedIntType{bits, 1 << (bits - 1)}));
      EXPECT_EQ(v1.g_idx.defined(), ao);
    }
}

TEST(WNA16StandardForm, CompressedTensorsAcceptsI32WeightShape) {
  const IntQuant q = hand_built(4, 32, true, false);
  CheckpointTensors t = encode_ct(q, false, DType::I32);
  // The compressor writes weight_shape as I32; the I64 parameter widens it exactly.
  const WNA16Weights i32 = standard_form(ct_json(4, 32, true, false), t);
  const WNA16Weights i64 = standard_form(ct_json(4, 32, true, false), encode_ct(q, false, DType::I64));
  expect_identical(i32, i64, "I32 vs I64 weight_shape");
}

// ---- value checks ----

CheckpointTensors gptq_tensors(int bits, bool sym, bool ao, GptqFormat f) { return encode_gptq(hand_built(bits, 32, sym, ao), f); }

TEST(WNA16Validation, GIdxOutOfRangeWrongLengthBadPermutation) {  // B.5 item 21
  const std::string json = gptq_json(4, 32, true, true, "gptq");
  CheckpointTensors t = gptq_tensors(4, true, true, GptqFormat::V1);
  t["g_idx"].data<int32_t>()[5] = 3;  // groups are 0..2
  EXPECT_QLM_ERROR(load(json, t), "weights.g_idx", "g_idx[5] = 3 is out of range");
  t["g_idx"].data<int32_t>()[5] = -1;
  EXPECT_QLM_ERROR(load(json, t), "weights.g_idx", "out of range");
  t = gptq_tensors(4, true, true, GptqFormat::V1);
  int32_t* g = t["g_idx"].data<int32_t>();
  g[0] = g[0] == 0 ? 1 : 0;  // one group now appears 33 times, another 31
  EXPECT_QLM_ERROR(load(json, t), "weights.g_idx", "exactly group_size = 32 times");
  t = gptq_tensors(4, true, true, GptqFormat::V1);
  t["g_idx"] = Tensor::zeros({kK - 1}, DType::I32);
  EXPECT_QLM_ERROR(load(json, t), "loader.shape", "g_idx");
  // Without act-order a g_idx must be k / group_size: an act-order checkpoint labelled desc_act=false.
  EXPECT_QLM_ERROR(load(gptq_json(4, 32, true, false, "gptq"), gptq_tensors(4, true, true, GptqFormat::V1)),
                   "weights.g_idx", "desc_act");
}

TEST(WNA16Validation, ZeroPointsAndV1V2Convention) {  // B.5 item 22
  // Asymmetric v1: a stored 15 means a true zero of 16, which 4 bits cannot hold.
  CheckpointTensors t = gptq_tensors(4, false, false, GptqFormat::V1);
  t["qzeros"].data<int32_t>()[0] |= 0xF;
  EXPECT_QLM_ERROR(load(gptq_json(4, 32, false, false, "gptq"), t), "weights.zero_point", "is 16");
  // Symmetric v2 zeros (8) in a checkpoint labelled v1, and v1 zeros (7) labelled v2.
  EXPECT_QLM_ERROR(load(gptq_json(4, 32, true, false, "gptq"), gptq_tensors(4, true, false, GptqFormat::V2)),
                   "weights.zero_point_convention", "gptq_v2");
  EXPECT_QLM_ERROR(load(gptq_json(8, 32, true, false, "gptq_v2"), gptq_tensors(8, true, false, GptqFormat::V1)),
                   "weights.zero_point_convention", "\"gptq\"");
  // Symmetric checkpoint whose zeros are not the midpoint at all: really asymmetric.
  EXPECT_QLM_ERROR(load(gptq_json(4, 32, true, false, "gptq"), gptq_tensors(4, false, false, GptqFormat::V1)),
                   "weights.zero_point", "set sym to false");
  // 8-bit and 2-bit midpoints (3-bit is covered by the layer tests, which need N % 32 == 0).
  EXPECT_NO_THROW(load(gptq_json(8, 32, true, false, "gptq"), gptq_tensors(8, true, false, GptqFormat::V1)));
  EXPECT_NO_THROW(load(gptq_json(2, 32, true, false, "gptq_v2"), gptq_tensors(2, true, false, GptqFormat::V2)));
}

TEST(WNA16Validation, Scales) {  // B.5 item 23
  const std::string json = gptq_json(4, 32, true, false, "gptq");
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity(), -0.5f}) {
    CheckpointTensors t = gptq_tensors(4, true, false, GptqFormat::V1);
    Tensor s = t["scales"].to(DType::F32);
    s.data<float>()[kN + 3] = bad;
    t["scales"] = s.to(DType::F16);
    EXPECT_QLM_ERROR(load(json, t), "weights.scale", "scale at [1, 3]");
  }
  // Zero scales load, with a warning count.
  CheckpointTensors t = gptq_tensors(4, true, false, GptqFormat::V1);
  Tensor s = t["scales"].to(DType::F32);
  s.data<float>()[0] = 0.f;
  s.data<float>()[1] = 0.f;
  t["scales"] = s;  // F32 scales load as well
  auto config = make_quant_config(json);
  LayerFixture f{.config = config.get(), .spec = column_spec(), .backend = "cpu_ref"};
  auto layer = build_layer(f, {t}, TpContext{});
  const auto& warnings = dynamic_cast<WNA16LinearMethod&>(layer->method()).warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("2 of 144 weight scales are zero"), std::string::npos) << warnings[0];
}

TEST(WNA16Validation, GroupSizeAgainstLayerAndTensorParallelism) {  // B.5 item 17
  const IntQuant q = hand_built(4, 32, true, false);
  const CheckpointTensors t = encode_gptq(q, GptqFormat::V1);
  EXPECT_QLM_ERROR(load(gptq_json(4, 36, true, false, "gptq"), t), "quant.group_size",
                   "group_size 36 does not divide in_features K = 96");
  EXPECT_QLM_ERROR(load(gptq_json(4, 128, true, false, "gptq"), t), "quant.group_size",
                   "group_size 128 is larger than in_features K = 96");
  // Row-parallel at TP 4: K_p = 24 is not a whole number of 32-row groups.
  auto config = make_quant_config(gptq_json(4, 32, true, false, "gptq"));
  LinearSpec row = column_spec();
  row.kind = LinearKind::Row;
  LocalCommGroup group(4);
  EXPECT_QLM_ERROR(LinearLayer(row, config.get(), QuantContext{}, group.context(1)), "quant.partition",
                   "use a smaller tensor-parallel size (sizes that work for this layer: 1)");
  // AWQ: an output partition that is not a multiple of 8.
  auto awq = make_quant_config(kAwqJson);
  LinearSpec col = column_spec();
  col.output_size = 40;
  EXPECT_QLM_ERROR(LinearLayer(col, awq.get(), QuantContext{}, group.context(0)), "quant.partition",
                   "AWQ packs 8 output columns per int32 word");
}

TEST(WNA16Validation, CompressedTensorsWeightShapeMismatch) {  // B.5 item 20
  const IntQuant q = hand_built(4, 32, false, false);
  CheckpointTensors t = encode_ct(q, false);
  t["weight_shape"] = Tensor::from_vector(std::vector<int64_t>{kN, kK + 32}, {2});
  EXPECT_QLM_ERROR(load(ct_json(4, 32, false, false), t), "weights.shape", "weight_shape is [48, 128]");
}

}  // namespace
}  // namespace qlm::testing
