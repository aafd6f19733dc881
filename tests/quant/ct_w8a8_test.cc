// compressed-tensors float-quantized (FP8 W8A8 / W8A16), int-quantized (INT8 W8A8, symmetric and
// asymmetric activations) and naive-quantized layers versus the float64 reference at TP 1 and 2;
// mixed config_groups; the schemes qlm does not run yet are named in the error.
#include <gtest/gtest.h>

#include "quant/compressed_tensors/ct_config.h"
#include "quant/w8a8_method.h"
#include "quant/w8a8_test_util.h"
#include "support/expect_error.h"

namespace qlm::testing {
namespace {

constexpr int64_t kK = 128, kM = 6;

std::string ct_json(const std::string& format, const std::string& weights, const std::string& inputs,
                    const std::string& extra = "") {
  return fmt::format(R"({{"quant_method": "compressed-tensors", "format": "{}", "ignore": ["lm_head"]{},
      "config_groups": {{"group_0": {{"targets": ["Linear"], "weights": {}{}}}}}}})",
                     format, extra, weights, inputs.empty() ? "" : ", \"input_activations\": " + inputs);
}

LinearSpec merged(int64_t gate, int64_t up) {
  LinearSpec s = gate_up_spec(kK, gate, up);
  s.bias = true;
  return s;
}

LinearSpec row(int64_t N) { return down_spec(kK, N); }

PartTensors with_bias(std::vector<CheckpointTensors> parts, const std::vector<int64_t>& rows,
                      std::vector<float>& bias) {
  int64_t n0 = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::vector<float> b(static_cast<size_t>(rows[i]));
    for (int64_t n = 0; n < rows[i]; ++n) b[n] = 0.02f * static_cast<float>((n0 + n) % 9) - 0.08f;
    bias.insert(bias.end(), b.begin(), b.end());
    parts[i]["bias"] = Tensor::from_vector(b, {rows[i]});
    n0 += rows[i];
  }
  return parts;
}

const char* kFp8Channel =
    R"({"num_bits": 8, "type": "float", "symmetric": true, "strategy": "channel", "dynamic": false})";
const char* kFp8Tensor =
    R"({"num_bits": 8, "type": "float", "symmetric": true, "strategy": "tensor", "dynamic": false})";
const char* kFp8Token = R"({"num_bits": 8, "type": "float", "symmetric": true, "strategy": "token", "dynamic": true})";
const char* kInt8Channel =
    R"({"num_bits": 8, "type": "int", "symmetric": true, "strategy": "channel", "dynamic": false})";
const char* kInt8Tensor =
    R"({"num_bits": 8, "type": "int", "symmetric": true, "strategy": "tensor", "dynamic": false})";

TEST(CtW8A8, Fp8ChannelDynamicTokenMatchesReference) {
  auto cfg = make_quant_config(ct_json("float-quantized", kFp8Channel, kFp8Token));
  LayerFixture f{.config = cfg.get(), .spec = merged(64, 96), .backend = "auto"};
  W8Part g = channel_part(random_nk(64, kK, 1), 64, kK, false), u = channel_part(random_nk(96, kK, 2), 96, kK, false);
  std::vector<float> bias;
  PartTensors pt = with_bias({g.tensors, u.tensors}, {64, 96}, bias);
  const std::vector<float> x = random_inputs(kM, kK, 3);
  const auto ref = ref_output(ref_acts(x, kM, kK, RefAct::Fp8Token), kM, kK, {&g.deq, &u.deq}, {64, 96}, &bias);
  for (int tp : {1, 2}) EXPECT_LE(rel_mean_error(run_layer_tp(f, pt, x, kM, tp), ref), 1e-3) << "tp=" << tp;
}

TEST(CtW8A8, Fp8W8A16FusedTensorScalesBecomeChannelwise) {
  auto cfg = make_quant_config(ct_json("float-quantized", kFp8Tensor, ""));
  LayerFixture f{.config = cfg.get(), .spec = merged(64, 64), .backend = "auto"};
  W8Part g = fp8_tensor_part(random_nk(64, kK, 4), 64, kK, 1.0f, false);
  W8Part u = fp8_tensor_part(random_nk(64, kK, 5), 64, kK, 2.5f, false);
  std::vector<float> bias;
  PartTensors pt = with_bias({g.tensors, u.tensors}, {64, 64}, bias);
  const std::vector<float> x = random_inputs(kM, kK, 6);
  auto layer = build_layer(f, pt, {});
  EXPECT_EQ(dynamic_cast<W8A8LinearMethod&>(layer->method()).kernel_config().weight_scale, WeightScaleKind::Channel);
  const auto ref = ref_output(ref_acts(x, kM, kK, RefAct::None), kM, kK, {&g.deq, &u.deq}, {64, 64}, &bias);
  // Weight-only: the only rounding is f32 accumulation.
  for (int tp : {1, 2}) EXPECT_LE(rel_mean_error(run_layer_tp(f, pt, x, kM, tp), ref), 1e-5) << "tp=" << tp;
}

TEST(CtW8A8, Fp8BlockWithGroupActivations) {
  auto cfg = make_quant_config(ct_json(
      "float-quantized",
      R"({"num_bits": 8, "type": "float", "symmetric": true, "strategy": "block", "block_structure": [32, 32], "dynamic": false})",
      R"({"num_bits": 8, "type": "float", "symmetric": true, "strategy": "group", "group_size": 32, "dynamic": true})"));
  LinearSpec spec = merged(64, 128);
  spec.bias = false;
  LayerFixture f{.config = cfg.get(), .spec = spec, .backend = "auto"};
  W8Part g = fp8_block_part(random_nk(64, kK, 7), 64, kK, 32, 32, "weight_scale");
  W8Part u = fp8_block_part(random_nk(128, kK, 8), 128, kK, 32, 32, "weight_scale");
  const std::vector<float> x = random_inputs(kM, kK, 9);
  const auto ref = ref_output(ref_acts(x, kM, kK, RefAct::Fp8Group, 0, 0, 32), kM, kK, {&g.deq, &u.deq}, {64, 128});
  for (int tp : {1, 2})
    EXPECT_LE(rel_mean_error(run_layer_tp(f, {g.tensors, u.tensors}, x, kM, tp), ref), 1e-3) << "tp=" << tp;
  // Fused parts whose rank slices split a block (96 / 2 = 48 rows, blocks of 32) are rejected
  // before loading, naming the sizes (unfused layers slice a whole grid instead: fp8_test.cc).
  LinearSpec odd = merged(64, 96);
  odd.bias = false;
  EXPECT_QLM_ERROR(LinearLayer(odd, cfg.get(), {}, TpContext{.rank = 0, .size = 2, .comm = nullptr}),
                   "layer.block_split", "output slice 48");
}

TEST(CtW8A8, Int8DynamicTokenSymmetricAndAsymmetric) {
  for (bool sym : {true, false}) {
    const std::string in =
        fmt::format(R"({{"num_bits": 8, "type": "int", "symmetric": {}, "strategy": "token", "dynamic": true}})", sym);
    auto cfg = make_quant_config(ct_json("int-quantized", kInt8Channel, in));
    LayerFixture f{.config = cfg.get(), .spec = merged(64, 96), .backend = "auto"};
    W8Part g = channel_part(random_nk(64, kK, 11), 64, kK, true), u = channel_part(random_nk(96, kK, 12), 96, kK, true);
    std::vector<float> bias;
    PartTensors pt = with_bias({g.tensors, u.tensors}, {64, 96}, bias);
    const std::vector<float> x = random_inputs(kM, kK, 13);
    const auto ref = ref_output(ref_acts(x, kM, kK, sym ? RefAct::Int8Token : RefAct::Int8TokenAsym), kM, kK,
                                {&g.deq, &u.deq}, {64, 96}, &bias);
    for (int tp : {1, 2})
      EXPECT_LE(rel_mean_error(run_layer_tp(f, pt, x, kM, tp), ref), 1e-5) << "sym=" << sym << " tp=" << tp;
  }
}

// Static per-tensor activations with zero points that differ between the fused parts: one float
// range covering both, re-expressed as one (scale, zero point).
TEST(CtW8A8, Int8StaticAsymmetricFusedZeroPoints) {
  auto cfg = make_quant_config(
      ct_json("int-quantized", kInt8Tensor,
              R"({"num_bits": 8, "type": "int", "symmetric": false, "strategy": "tensor", "dynamic": false})"));
  LinearSpec spec = merged(64, 64);
  spec.bias = false;
  LayerFixture f{.config = cfg.get(), .spec = spec, .backend = "auto"};
  W8Part g = int8_tensor_part(random_nk(64, kK, 14), 64, kK, 1.0f),
         u = int8_tensor_part(random_nk(64, kK, 15), 64, kK, 1.3f);
  g.tensors["input_scale"] = Tensor::from_vector(std::vector<float>{0.01f}, {1});
  g.tensors["input_zero_point"] = Tensor::from_vector(std::vector<int8_t>{-3}, {1});
  u.tensors["input_scale"] = Tensor::from_vector(std::vector<float>{0.012f}, {1});
  u.tensors["input_zero_point"] = Tensor::from_vector(std::vector<int8_t>{5}, {1});
  const std::vector<float> x = random_inputs(kM, kK, 16);
  // Independent range merge: lo = min((-128 - z) s), hi = max((127 - z) s).
  const double lo = std::min((-128.0 + 3) * 0.01f, (-128.0 - 5) * 0.012f),
               hi = std::max((127.0 + 3) * 0.01f, (127.0 - 5) * 0.012f);
  const float s = static_cast<float>((hi - lo) / 255.0);
  const int zp = static_cast<int>(-128.0 - lo / ((hi - lo) / 255.0));
  auto layer = build_layer(f, {g.tensors, u.tensors}, {}, {}, [](LinearLayer& l) {
    dynamic_cast<W8A8LinearMethod&>(l.method()).keep_standard_form(true);
  });
  const auto& sf = dynamic_cast<W8A8LinearMethod&>(layer->method()).standard_form();
  EXPECT_FLOAT_EQ(sf->input_scale, s);
  EXPECT_EQ(sf->input_zero_point, zp);
  const auto ref = ref_output(ref_acts(x, kM, kK, RefAct::Int8Static, sf->input_scale, sf->input_zero_point), kM, kK,
                              {&g.deq, &u.deq}, {64, 64});
  for (int tp : {1, 2})
    EXPECT_LE(rel_mean_error(run_layer_tp(f, {g.tensors, u.tensors}, x, kM, tp), ref), 1e-5) << "tp=" << tp;
}

TEST(CtW8A8, NaiveQuantizedAndRowParallel) {
  auto cfg = make_quant_config(
      ct_json("naive-quantized", kInt8Channel,
              R"({"num_bits": 8, "type": "int", "symmetric": true, "strategy": "token", "dynamic": true})"));
  LayerFixture f{.config = cfg.get(), .spec = row(80), .backend = "auto"};
  W8Part p = channel_part(random_nk(80, kK, 17), 80, kK, true);
  const std::vector<float> x = random_inputs(kM, kK, 18);
  const std::vector<float> y1 = run_layer_tp(f, {p.tensors}, x, kM, 1);
  const auto ref = ref_output(ref_acts(x, kM, kK, RefAct::Int8Token), kM, kK, {&p.deq}, {80});
  EXPECT_LE(rel_mean_error(y1, ref), 1e-5);
  // Row-parallel ranks quantize their own K halves: close to, not equal to, TP 1.
  EXPECT_LE(rel_mean_error(run_layer_tp(f, {p.tensors}, x, kM, 2), ref), 2e-2);
}

TEST(CtW8A8, MixedConfigGroups) {
  auto cfg = make_quant_config(fmt::format(R"({{"quant_method": "compressed-tensors", "format": "float-quantized",
      "ignore": ["lm_head", "model.layers.0.mlp.up_proj"],
      "config_groups": {{
        "attn": {{"targets": ["re:.*self_attn.*"], "weights": {}, "input_activations": {}}},
        "mlp": {{"targets": ["re:.*mlp.*"], "format": "int-quantized", "weights": {},
                 "input_activations": {{"num_bits": 8, "type": "int", "strategy": "token", "dynamic": true}}}},
        "packed": {{"targets": ["re:.*extra.*"], "format": "pack-quantized",
                    "weights": {{"num_bits": 4, "group_size": 32, "strategy": "group"}}}}}}}})",
                                           kFp8Channel, kFp8Token, kInt8Channel));
  auto* ct = dynamic_cast<CompressedTensorsConfig*>(cfg.get());
  ASSERT_NE(ct, nullptr);
  auto q = ct->w8a8_scheme_for("model.layers.0.self_attn.q_proj", LayerInfo::Kind::Linear);
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->weight_type, W8Type::Fp8E4M3);
  auto d = ct->w8a8_scheme_for("model.layers.0.mlp.down_proj", LayerInfo::Kind::Linear);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->weight_type, W8Type::Int8);
  EXPECT_FALSE(ct->w8a8_scheme_for("model.layers.0.mlp.up_proj", LayerInfo::Kind::Linear).has_value());
  EXPECT_TRUE(ct->scheme_for("model.layers.0.extra_proj", LayerInfo::Kind::Linear).has_value());
  LayerInfo gate_up{.kind = LayerInfo::Kind::Linear,
                    .prefix = "model.layers.0.mlp.gate_up_proj",
                    .shard_prefixes = {"model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"},
                    .row_parallel = false};
  EXPECT_QLM_ERROR(cfg->get_linear_method(gate_up, {}), "config.fused_mismatch", "up_proj");
  LayerInfo o{.kind = LayerInfo::Kind::Linear,
              .prefix = "model.layers.0.self_attn.o_proj",
              .shard_prefixes = {},
              .row_parallel = true};
  EXPECT_EQ(cfg->get_linear_method(o, {})->name(), "compressed-tensors");
}

TEST(CtW8A8, UnsupportedSchemesAreNamed) {
  auto expect = [](const std::string& json, const std::string& fragment) {
    EXPECT_QLM_ERROR(make_quant_config(json), "config.unsupported_scheme", fragment);
  };
  expect(
      ct_json("nvfp4-pack-quantized",
              R"({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16})",
              R"({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "dynamic": "local"})"),
      "NVFP4 W4A4");
  expect(ct_json("mxfp4-pack-quantized", R"({"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32})",
                 R"({"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32, "dynamic": true})"),
         "MXFP4 W4A4");
  expect(ct_json("pack-quantized", R"({"num_bits": 4, "strategy": "group", "group_size": 128})",
                 R"({"num_bits": 8, "type": "int", "strategy": "token", "dynamic": true})"),
         "W4A8 int");
  expect(ct_json("float-quantized", kFp8Channel,
                 R"({"num_bits": 8, "type": "float", "symmetric": false, "strategy": "token", "dynamic": true})"),
         "must be symmetric");
  expect(ct_json("int-quantized", R"({"num_bits": 8, "type": "int", "symmetric": false, "strategy": "channel"})",
                 R"({"num_bits": 8, "type": "int", "strategy": "token", "dynamic": true})"),
         "no weight zero point");
  expect(ct_json("int-quantized", kInt8Channel,
                 R"({"num_bits": 8, "type": "int", "strategy": "tensor", "dynamic": true})"),
         "per token");
  expect(ct_json("naive-quantized", kInt8Channel, ""), "pack-quantized WNA16");
  expect(ct_json("float-quantized", kFp8Channel, kFp8Token,
                 R"(, "kv_cache_scheme": {"num_bits": 8, "type": "int", "strategy": "tensor"})"),
         "kv_cache_scheme");
}

TEST(CtW8A8, KvCacheSchemeAccepted) {
  auto cfg = make_quant_config(
      ct_json("float-quantized", kFp8Channel, kFp8Token,
              R"(, "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false})"));
  EXPECT_TRUE(dynamic_cast<CompressedTensorsConfig&>(*cfg).has_kv_cache_scheme());
  EXPECT_NE(cfg->describe().find("kv_cache=fp8"), std::string::npos);
}

}  // namespace
}  // namespace qlm::testing
