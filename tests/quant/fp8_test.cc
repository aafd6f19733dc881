// quant_method fp8: per-tensor (static / dynamic), fused q/k/v and gate/up scales requantized to
// their max, block scales with ceil-divided grids (fused parts and TP shards not aligned to blocks),
// ignored_layers, and the validation errors (RELIABILITY.md B.5 items 18, 23 and the fp8 cases).
#include <gtest/gtest.h>

#include "quant/fp8/fp8_config.h"
#include "quant/w8a8_method.h"
#include "quant/w8a8_test_util.h"
#include "support/expect_error.h"

namespace qlm::testing {
namespace {

constexpr int64_t kK = 128, kM = 5;

LinearSpec qkv_spec() {
  LinearSpec s;
  s.kind = LinearKind::QKV;
  s.prefix = "model.layers.0.self_attn.qkv_proj";
  s.input_size = kK;
  s.head_size = 16;
  s.total_num_heads = 4;
  s.total_num_kv_heads = 2;
  s.output_size = 64 + 32 + 32;
  s.bias = true;
  s.shard_prefixes = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                      "model.layers.0.self_attn.v_proj"};
  return s;
}

LinearSpec merged_spec(int64_t gate, int64_t up, int64_t K = kK) { return gate_up_spec(K, gate, up); }

LinearSpec plain_spec(LinearKind kind, int64_t N, int64_t K) {
  LinearSpec s;
  s.kind = kind;
  s.prefix = kind == LinearKind::Row ? "model.layers.0.mlp.down_proj" : "model.layers.0.mlp.proj";
  s.input_size = K;
  s.output_size = N;
  return s;
}

std::vector<float> bias_of(int64_t N) {
  std::vector<float> b(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) b[n] = 0.05f * static_cast<float>(n % 5) - 0.1f;
  return b;
}

// q/k/v with three different per-tensor scales; the reference uses the independently requantized
// weights (FORMATS.md §6: q' = e4m3(clamp((q * s_i) * (1/max))).
TEST(Fp8Format, FusedPerTensorScalesAreRequantizedToTheirMax) {
  for (const char* scheme : {"dynamic", "static"}) {
    auto cfg = make_quant_config(fmt::format(R"({{"quant_method": "fp8", "activation_scheme": "{}"}})", scheme));
    LayerFixture f{.config = cfg.get(), .spec = qkv_spec(), .backend = "auto"};
    const std::vector<int64_t> rows = {64, 32, 32};
    std::vector<W8Part> parts;
    PartTensors pt;
    const float factors[] = {1.0f, 1.7f, 0.6f};
    const float in_scales[] = {0.01f, 0.013f, 0.011f};
    for (size_t i = 0; i < 3; ++i) {
      parts.push_back(fp8_tensor_part(random_nk(rows[i], kK, 10 + i), rows[i], kK, factors[i]));
      if (std::string(scheme) == "static")
        parts.back().tensors["input_scale"] = Tensor::from_vector(std::vector<float>{in_scales[i]}, Shape{});
      pt.push_back(parts.back().tensors);
    }
    const std::vector<float> bias = bias_of(128);
    pt[0]["bias"] = Tensor::from_vector(std::vector<float>(bias.begin(), bias.begin() + 64), {64});
    pt[1]["bias"] = Tensor::from_vector(std::vector<float>(bias.begin() + 64, bias.begin() + 96), {32});
    pt[2]["bias"] = Tensor::from_vector(std::vector<float>(bias.begin() + 96, bias.end()), {32});

    // Independent requantization to the max scale.
    float m = 0;
    for (const W8Part& p : parts) m = std::max(m, p.tensors.at("weight_scale").data<float>()[0]);
    std::vector<std::vector<double>> req(3);
    std::vector<uint8_t> want_codes;
    for (size_t i = 0; i < 3; ++i) {
      const float s = parts[i].tensors.at("weight_scale").data<float>()[0];
      const uint8_t* c = parts[i].tensors.at("weight").data<uint8_t>();
      for (int64_t j = 0; j < rows[i] * kK; ++j) {
        const uint8_t q = s == m ? c[j] : f32_to_e4m3(std::clamp(e4m3_to_f32(c[j]) * s * (1.0f / m), -448.f, 448.f));
        want_codes.push_back(q);
        req[i].push_back(double(e4m3_to_f32(q)) * m);
      }
    }
    auto layer = build_layer(
        f, pt, {}, {}, [](LinearLayer& l) { dynamic_cast<W8A8LinearMethod&>(l.method()).keep_standard_form(true); });
    const auto& sf = dynamic_cast<W8A8LinearMethod&>(layer->method()).standard_form();
    ASSERT_TRUE(sf.has_value());
    ASSERT_EQ(sf->weight_scale.numel(), 1);
    EXPECT_EQ(sf->weight_scale.data<float>()[0], m);
    const uint8_t* got = sf->codes.data<uint8_t>();
    for (size_t j = 0; j < want_codes.size(); ++j) ASSERT_EQ(got[j], want_codes[j]) << "code " << j;
    if (std::string(scheme) == "static") {
      EXPECT_EQ(sf->input_scale, 0.013f);
    }

    const std::vector<float> x = random_inputs(kM, kK, 3);
    const std::vector<double> xd = std::string(scheme) == "static" ? ref_acts(x, kM, kK, RefAct::Fp8Static, 0.013f)
                                                                   : ref_acts(x, kM, kK, RefAct::Fp8Token);
    const std::vector<double> ref = ref_output(xd, kM, kK, {&req[0], &req[1], &req[2]}, rows, &bias);
    for (int tp : {1, 2}) {
      const std::vector<float> y = run_layer_tp(f, pt, x, kM, tp);
      EXPECT_LE(rel_mean_error(y, ref), 1e-3) << scheme << " tp=" << tp;
    }
  }
}

// Block scales: fused parts that do not align to block_n (ceil-divided grids), unfused column and
// row layers whose tensor-parallel shards start inside a block.
TEST(Fp8Format, BlockScalesWithUnalignedPartsAndShards) {
  auto cfg = make_quant_config(R"({"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                                   "weight_block_size": [32, 32]})");
  const std::vector<float> x = random_inputs(kM, 96, 4);
  {  // gate 48 / up 80 at TP 1: part grids of 2 and 3 rows, up's starting at ceil(48/32) = 2
    LayerFixture f{.config = cfg.get(), .spec = merged_spec(48, 80, 96), .backend = "auto"};
    W8Part g = fp8_block_part(random_nk(48, 96, 21), 48, 96, 32, 32);
    W8Part u = fp8_block_part(random_nk(80, 96, 22), 80, 96, 32, 32);
    const std::vector<double> ref =
        ref_output(ref_acts(x, kM, 96, RefAct::Fp8Group, 0, 0, 32), kM, 96, {&g.deq, &u.deq}, {48, 80});
    EXPECT_LE(rel_mean_error(run_layer_tp(f, {g.tensors, u.tensors}, x, kM, 1), ref), 1e-3);
  }
  for (LinearKind kind : {LinearKind::Column, LinearKind::Row}) {  // N = K = 96, block 64: TP 2 splits at 48
    auto cfg64 = make_quant_config(R"({"quant_method": "fp8", "activation_scheme": "dynamic",
                                       "weight_block_size": [64, 64]})");
    LayerFixture f{.config = cfg64.get(), .spec = plain_spec(kind, 96, 96), .backend = "auto"};
    W8Part p = fp8_block_part(random_nk(96, 96, 23), 96, 96, 64, 64);
    const std::vector<float> y1 = run_layer_tp(f, {p.tensors}, x, kM, 1);
    const std::vector<double> ref = ref_output(ref_acts(x, kM, 96, RefAct::Fp8Group, 0, 0, 64), kM, 96, {&p.deq}, {96});
    EXPECT_LE(rel_mean_error(y1, ref), 1e-3) << linear_kind_name(kind);
    const std::vector<float> y2 = run_layer_tp(f, {p.tensors}, x, kM, 2);
    // Row-parallel ranks quantize their own activation groups (a group straddles the split).
    EXPECT_LE(rel_mean_error(y2, ref), kind == LinearKind::Row ? 3e-2 : 1e-3) << linear_kind_name(kind);
  }
}

TEST(Fp8Format, IgnoredLayersStayUnquantized) {
  auto cfg = make_quant_config(R"({"quant_method": "fp8", "activation_scheme": "dynamic",
                                   "ignored_layers": ["model.layers.0.mlp.down_proj"]})");
  LayerInfo down{.kind = LayerInfo::Kind::Linear,
                 .prefix = "model.layers.0.mlp.down_proj",
                 .shard_prefixes = {},
                 .row_parallel = true};
  EXPECT_EQ(cfg->get_linear_method(down, {})->name(), "unquantized");
  LayerInfo up{.kind = LayerInfo::Kind::Linear,
               .prefix = "model.layers.0.mlp.up_proj",
               .shard_prefixes = {},
               .row_parallel = false};
  EXPECT_EQ(cfg->get_linear_method(up, {})->name(), "fp8");
  auto cfg2 = make_quant_config(R"({"quant_method": "fp8", "activation_scheme": "dynamic",
                                    "modules_to_not_convert": ["model.layers.0.self_attn.k_proj"]})");
  LayerInfo qkv{.kind = LayerInfo::Kind::Linear,
                .prefix = "model.layers.0.self_attn.qkv_proj",
                .shard_prefixes = qkv_spec().shard_prefixes,
                .row_parallel = false};
  EXPECT_QLM_ERROR(cfg2->get_linear_method(qkv, {}), "config.fused_mismatch", "k_proj");
  LayerInfo head{.kind = LayerInfo::Kind::LmHead, .prefix = "lm_head", .shard_prefixes = {}, .row_parallel = false};
  EXPECT_EQ(cfg->get_linear_method(head, {})->name(), "unquantized");
}

TEST(Fp8Format, ConfigErrors) {
  EXPECT_QLM_ERROR(make_quant_config(R"({"quant_method": "fp8"})"), "config.missing_key", "activation_scheme");
  EXPECT_QLM_ERROR(make_quant_config(R"({"quant_method": "fp8", "activation_scheme": "per_token"})"), "config.value",
                   "\"static\" or \"dynamic\"");
  EXPECT_QLM_ERROR(make_quant_config(R"({"quant_method": "fp8", "activation_scheme": "static",
                                         "weight_block_size": [128, 128]})"),
                   "config.fp8_block_static", "only dynamic");
  EXPECT_QLM_ERROR(make_quant_config(R"({"quant_method": "fp8", "activation_scheme": "dynamic",
                                         "weight_block_size": [128]})"),
                   "config.value", "exactly 2");
  EXPECT_QLM_ERROR(make_quant_config(R"({"quant_method": "fp8", "activation_scheme": "dynamic",
                                         "weight_block_size": [128, 0]})"),
                   "config.value", "weight_block_size");
  EXPECT_QLM_ERROR(make_quant_config(R"({"quant_method": "fp8", "activation_scheme": "dynamic",
                                         "weight_block_size": "128x128"})"),
                   "config.value", "weight_block_size");
  EXPECT_QLM_ERROR(make_quant_config(R"({"quant_method": "fp8", "activation_scheme": "dynamic",
                                         "weight_block_size": [128.0, 128]})"),
                   "config.type", "weight_block_size");
}

// B.5 item 23 and the fp8 cases: NaN / Inf / zero / negative scales, NaN codes; each names the layer.
TEST(Fp8Format, BadValuesGiveSpecificErrors) {
  auto cfg = make_quant_config(R"({"quant_method": "fp8", "activation_scheme": "static"})");
  LayerFixture f{.config = cfg.get(), .spec = plain_spec(LinearKind::Column, 32, 64), .backend = "auto"};
  auto good = [] {
    W8Part p = fp8_tensor_part(random_nk(32, 64, 5), 32, 64);
    p.tensors["input_scale"] = Tensor::from_vector(std::vector<float>{0.02f}, Shape{});
    return p.tensors;
  };
  for (float bad : {std::nanf(""), INFINITY, -INFINITY, 0.0f, -0.5f}) {
    CheckpointTensors t = good();
    t["weight_scale"] = Tensor::from_vector(std::vector<float>{bad}, Shape{});
    EXPECT_QLM_ERROR(build_layer(f, {t}, {}), "weights.scale", "model.layers.0.mlp.proj");
    t = good();
    t["input_scale"] = Tensor::from_vector(std::vector<float>{bad}, {1});
    EXPECT_QLM_ERROR(build_layer(f, {t}, {}), "weights.input_scale", "finite and > 0");
  }
  CheckpointTensors t = good();
  Tensor w = t["weight"].clone();
  w.data<uint8_t>()[3] = 0x7f;
  w.data<uint8_t>()[70] = 0xff;
  t["weight"] = w;
  EXPECT_QLM_ERROR(build_layer(f, {t}, {}), "weights.fp8_nan", "2 NaN code(s)");
  // A per-tensor scale stored per channel is a shape error naming the tensor.
  t = good();
  t["weight_scale"] = Tensor::from_vector(std::vector<float>(32, 0.01f), {32, 1});
  EXPECT_QLM_ERROR(build_layer(f, {t}, {}), "loader.shape", "weight_scale");
  // Missing input_scale with a static scheme: incomplete.
  t = good();
  EXPECT_QLM_ERROR(build_layer(f, {t}, {}, {"input_scale"}), "loader.incomplete", "input_scale");
  // Block grid with a NaN.
  auto bcfg =
      make_quant_config(R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [16, 16]})");
  LayerFixture bf{.config = bcfg.get(), .spec = plain_spec(LinearKind::Column, 32, 64), .backend = "auto"};
  W8Part bp = fp8_block_part(random_nk(32, 64, 6), 32, 64, 16, 16);
  Tensor s = bp.tensors["weight_scale_inv"].clone();
  s.data<float>()[5] = std::nanf("");
  bp.tensors["weight_scale_inv"] = s;
  EXPECT_QLM_ERROR(build_layer(bf, {bp.tensors}, {}), "weights.scale", "at block [1, 1]");
  // B.5 item 18: a scale grid with too few blocks is a shape error, never an out-of-bounds read.
  W8Part short_grid = fp8_block_part(random_nk(32, 64, 6), 32, 64, 16, 16);
  short_grid.tensors["weight_scale_inv"] = Tensor::from_vector(std::vector<float>(2 * 3, 0.01f), {2, 3});
  EXPECT_QLM_ERROR(build_layer(bf, {short_grid.tensors}, {}), "loader.shape", "weight_scale_inv");
}

TEST(Fp8Format, KernelBackendsAgree) {
  auto cfg = make_quant_config(R"({"quant_method": "fp8", "activation_scheme": "dynamic"})");
  W8Part p = fp8_tensor_part(random_nk(80, 128, 8), 80, 128);
  const std::vector<float> x = random_inputs(9, 128, 9);
  LayerFixture ref{.config = cfg.get(), .spec = plain_spec(LinearKind::Column, 80, 128), .backend = "cpu_ref"};
  LayerFixture fast = ref;
  fast.backend = "cpu_fast";
  EXPECT_LE(max_rel_diff(run_layer_tp(fast, {p.tensors}, x, 9, 1), run_layer_tp(ref, {p.tensors}, x, 9, 1)), 1e-5);
}

}  // namespace
}  // namespace qlm::testing
