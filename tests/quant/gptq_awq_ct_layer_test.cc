// End-to-end WNA16 layers for every format x bits x group x symmetry x act-order x layer kind x
// TP in {1, 2, 4}: the layer output against the float64 product with the exactly dequantized
// weights (fresh random inputs, odd M, K and N not powers of two), and TP=N against TP=1.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/quantize_ref.h"

namespace qlm::testing {
namespace {

constexpr int64_t kK = 384, kM = 7;

struct Case {
  std::string format;  // gptq, awq, compressed-tensors
  int bits = 4;
  int64_t group = 32;
  bool sym = true;
  bool act_order = false;
  GptqFormat gptq_format = GptqFormat::V1;
  LinearKind kind = LinearKind::Column;
  std::string backend = "auto";
  std::string name() const {
    std::string n = format == "compressed-tensors" ? "ct" : format;
    n += fmt::format("_b{}_g{}_{}{}", bits, group < 0 ? std::string("ch") : std::to_string(group),
                     sym ? "sym" : "asym", act_order ? "_actorder" : "");
    if (format == "gptq") n += gptq_format == GptqFormat::V1 ? "_v1" : "_v2";
    n += std::string("_") + linear_kind_name(kind) + "_" + backend;
    return n;
  }
};

std::string config_json(const Case& c) {
  if (c.format == "gptq")
    return fmt::format(R"({{"quant_method": "gptq", "bits": {}, "group_size": {}, "desc_act": {}, "sym": {},
                           "checkpoint_format": "{}"}})",
                       c.bits, c.group, c.act_order, c.sym, c.gptq_format == GptqFormat::V1 ? "gptq" : "gptq_v2");
  if (c.format == "awq")
    return fmt::format(R"({{"quant_method": "awq", "bits": 4, "group_size": {}, "zero_point": true, "version": "gemm"}})",
                       c.group);
  return fmt::format(R"({{"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
      "config_groups": {{"group_0": {{"targets": ["Linear"], "weights": {{"num_bits": {}, "type": "int",
      "symmetric": {}, "strategy": "{}", "group_size": {}, "actorder": {}, "dynamic": false}}}}}}}})",
                     c.bits, c.sym, c.group < 0 ? "channel" : "group", c.group < 0 ? "null" : std::to_string(c.group),
                     c.act_order ? "\"group\"" : "null");
}

LinearSpec spec_for(LinearKind kind) {
  LinearSpec s;
  s.kind = kind;
  s.input_size = kK;
  s.bias = true;
  s.params_dtype = DType::F32;
  switch (kind) {
    case LinearKind::QKV:
      s.prefix = "model.layers.0.self_attn.qkv_proj";
      s.head_size = 32;
      s.total_num_heads = 8;
      s.total_num_kv_heads = 4;
      s.output_size = 8 * 32 + 2 * 4 * 32;
      s.shard_prefixes = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                          "model.layers.0.self_attn.v_proj"};
      break;
    case LinearKind::MergedColumn:
      s.prefix = "model.layers.0.mlp.gate_up_proj";
      s.output_sizes = {384, 256};
      s.output_size = 640;
      s.shard_prefixes = {"model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"};
      break;
    case LinearKind::Row:
      s.prefix = "model.layers.0.mlp.down_proj";
      s.output_size = 640;
      break;
    case LinearKind::Column:
    case LinearKind::Replicated:
      s.prefix = "model.layers.0.mlp.proj";
      s.output_size = 640;
      break;
  }
  return s;
}

std::vector<int64_t> parts_of(const LinearSpec& s) {
  if (s.kind == LinearKind::QKV) return {256, 128, 128};
  if (s.kind == LinearKind::MergedColumn) return s.output_sizes;
  return {s.output_size};
}

class WNA16Layer : public ::testing::TestWithParam<Case> {};

TEST_P(WNA16Layer, MatchesFloat64ReferenceAtEveryTpSize) {
  const Case& c = GetParam();
  auto config = make_quant_config(config_json(c));
  LayerFixture f{.config = config.get(), .spec = spec_for(c.kind), .backend = c.backend};
  const std::vector<int64_t> sizes = parts_of(f.spec);
  int64_t N = 0;
  for (int64_t s : sizes) N += s;

  // Quantize each part; act-order parts share one permutation (q/k/v see the same Hessian).
  PartTensors parts;
  std::vector<double> w_ref(static_cast<size_t>(kK * N));
  std::vector<double> bias_ref;
  int64_t col = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t Ni = sizes[i];
    auto w = random_weights(kK, Ni, 100 + i);
    QuantOptions opt{.bits = c.bits, .group_size = c.group, .symmetric = c.sym,
                     .act_order_seed = c.act_order ? std::optional<uint64_t>(77) : std::nullopt,
                     .scale_dtype = DType::F16, .min_zero = c.gptq_format == GptqFormat::V1 ? 1 : 0};
    IntQuant q = c.format == "gptq" ? quantize_gptq(w, kK, Ni, opt)
                 : c.format == "awq" ? quantize_awq(w, kK, Ni, c.group)
                                     : quantize_ct(w, kK, Ni, opt);
    CheckpointTensors t = c.format == "gptq" ? encode_gptq(q, c.gptq_format)
                          : c.format == "awq" ? encode_awq(q)
                                              : encode_ct(q, c.act_order);
    auto bias = random_inputs(1, Ni, 500 + i);
    t["bias"] = Tensor::from_vector(bias, {Ni});
    parts.push_back(std::move(t));
    const std::vector<double> deq = dequantize(q);
    for (int64_t k = 0; k < kK; ++k)
      for (int64_t n = 0; n < Ni; ++n) w_ref[k * N + col + n] = deq[k * Ni + n];
    bias_ref.insert(bias_ref.end(), bias.begin(), bias.end());
    col += Ni;
  }
  // Every part's weight_shape is loaded too: fused layers keep one [N_i, K] row per part.
  std::vector<std::string> skip;

  const auto x = random_inputs(kM, kK, 9);
  std::vector<double> y_ref = matmul_ref(x, kM, w_ref, kK, N);
  for (int64_t m = 0; m < kM; ++m)
    for (int64_t n = 0; n < N; ++n) y_ref[m * N + n] += bias_ref[n];

  const std::vector<float> y1 = run_layer_tp(f, parts, x, kM, 1, skip);
  EXPECT_LE(normwise_rel_error(y1, y_ref), 1e-5) << "TP=1";
  std::vector<double> y1d(y1.begin(), y1.end());
  for (int tp : {2, 4}) {
    const std::vector<float> yt = run_layer_tp(f, parts, x, kM, tp, skip);
    EXPECT_LE(normwise_rel_error(yt, y_ref), 1e-5) << "TP=" << tp;
    // Row-parallel ranks round their partial sums to fp32 before the all-reduce.
    const double parity = c.kind == LinearKind::Row ? 1e-5 : 1e-6;
    EXPECT_LE(normwise_rel_error(yt, y1d), parity) << "TP=" << tp << " vs TP=1";
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  const LinearKind kinds[] = {LinearKind::Column, LinearKind::Row, LinearKind::MergedColumn, LinearKind::QKV};
  for (const char* backend : {"cpu_ref", "auto"})
    for (LinearKind kind : kinds) {
      for (int bits : {2, 3, 4, 8})
        for (int64_t group : {32, -1})
          for (bool sym : {true, false})
            for (bool ao : {false, true})
              for (GptqFormat gf : {GptqFormat::V1, GptqFormat::V2}) {
                if (ao && group < 0) continue;  // desc_act is forced off with one group
                out.push_back({"gptq", bits, group, sym, ao, gf, kind, backend});
              }
      for (int64_t group : {32, 96, -1}) out.push_back({"awq", 4, group, false, false, GptqFormat::V1, kind, backend});
      for (int bits : {4, 8})
        for (int64_t group : {32, -1})
          for (bool sym : {true, false})
            for (bool ao : {false, true}) {
              if (ao && group < 0) continue;  // actorder group requires strategy group
              out.push_back({"compressed-tensors", bits, group, sym, ao, GptqFormat::V1, kind, backend});
            }
    }
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllFormats, WNA16Layer, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });

}  // namespace
}  // namespace qlm::testing
