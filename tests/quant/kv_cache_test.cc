// Quantized KV cache method: dtype names, the scale-name remapping of FORMATS.md §7, loading through
// the ModuleSet (every checkpoint spelling), defaults and the one-line report, and the B.5 item 24
// bad inputs (NaN / zero / negative / infinite scales, per-channel where a scalar is expected).
#include <gtest/gtest.h>

#include <cmath>

#include "core/float_convert.h"
#include "loader/loader.h"
#include "quant/kv_cache/kv_cache_method.h"
#include "support/expect_error.h"
#include "support/quantize_ref.h"

namespace qlm {
namespace {

using testing::make_quant_config;

Tensor scalar(float v) { return Tensor::from_vector(std::vector<float>{v}, Shape{}); }

TEST(KvCache, DTypeNames) {
  EXPECT_EQ(parse_kv_cache_dtype("auto"), KVCacheDType::Auto);
  EXPECT_EQ(parse_kv_cache_dtype("fp8"), KVCacheDType::Fp8E4M3);
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e4m3"), KVCacheDType::Fp8E4M3);
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e5m2"), KVCacheDType::Fp8E5M2);
  EXPECT_QLM_ERROR(parse_kv_cache_dtype("int8"), "config.kv_cache_dtype", "int8");
  auto fp8 = make_quant_config(R"({"quant_method": "fp8", "activation_scheme": "dynamic"})");
  EXPECT_QLM_ERROR(check_kv_cache_dtype(KVCacheDType::Fp8E5M2, fp8.get()), "config.kv_cache_dtype", "fp8_e5m2");
  check_kv_cache_dtype(KVCacheDType::Fp8E4M3, fp8.get());
  check_kv_cache_dtype(KVCacheDType::Fp8E5M2, nullptr);
}

TEST(KvCache, RemapsEveryCheckpointSpelling) {
  const std::string L = "model.layers.3.self_attn.";
  EXPECT_EQ(remap_kv_scale_name(L + "k_proj.k_scale"), L + "attn.k_scale");        // ModelOpt
  EXPECT_EQ(remap_kv_scale_name(L + "v_proj.v_scale"), L + "attn.v_scale");
  EXPECT_EQ(remap_kv_scale_name(L + "qkv_proj.k_scale"), L + "attn.k_scale");
  EXPECT_EQ(remap_kv_scale_name(L + "k_scale"), L + "attn.k_scale");              // compressed-tensors
  EXPECT_EQ(remap_kv_scale_name(L + "kv_scale"), L + "attn.kv_scale");            // legacy: both k and v
  EXPECT_EQ(remap_kv_scale_name(L + "k_proj.output_scale"), L + "attn.k_scale");  // old llm-compressor
  EXPECT_EQ(remap_kv_scale_name(L + "v_cache.scale"), L + "attn.v_scale");
  EXPECT_EQ(remap_kv_scale_name(L + "q_proj.output_scale"), L + "attn.q_scale");
  EXPECT_EQ(remap_kv_scale_name(L + "prob_output_scale"), L + "attn.prob_scale");
  EXPECT_EQ(remap_kv_scale_name(L + "k_proj.weight_scale"), std::nullopt);
  EXPECT_EQ(remap_kv_scale_name("model.norm.weight"), std::nullopt);
}

TEST(KvCache, LoadsThroughTheModuleSetAndReports) {
  ModuleSet m;
  std::vector<std::unique_ptr<KVCacheQuantMethod>> layers;
  for (int i = 0; i < 4; ++i) {
    layers.push_back(std::make_unique<KVCacheQuantMethod>(fmt::format("model.layers.{}.self_attn", i),
                                                          KVCacheDType::Fp8E4M3));
    layers.back()->register_params(m);
  }
  std::vector<std::pair<std::string, Tensor>> t = {
      {"model.layers.0.self_attn.k_proj.k_scale", scalar(0.5f)},
      {"model.layers.0.self_attn.v_proj.v_scale", scalar(0.25f)},
      {"model.layers.1.self_attn.kv_scale", Tensor::from_vector(std::vector<float>{0.125f}, {1})},
      {"model.layers.2.self_attn.v_scale", scalar(2.0f)},  // only v: serves both
  };
  load_tensors(t, m);
  std::vector<const KVCacheQuantMethod*> view;
  for (auto& l : layers) {
    l->process_weights_after_loading();
    view.push_back(l.get());
  }
  EXPECT_EQ(layers[0]->k_scale(), 0.5f);
  EXPECT_EQ(layers[0]->v_scale(), 0.25f);
  EXPECT_EQ(layers[1]->k_scale(), 0.125f);
  EXPECT_EQ(layers[1]->v_scale(), 0.125f);
  EXPECT_EQ(layers[2]->k_scale(), 2.0f);
  EXPECT_FALSE(layers[3]->has_checkpoint_scales());
  EXPECT_EQ(layers[3]->k_scale(), 1.0f);
  EXPECT_EQ(kv_scale_report(view),
            "KV cache fp8_e4m3: scales from the checkpoint for 3 of 4 attention layers, 1 defaulted to 1.0");
}

TEST(KvCache, QuantizeDequantizeRoundTrip) {
  for (KVCacheDType d : {KVCacheDType::Fp8E4M3, KVCacheDType::Fp8E5M2}) {
    KVCacheQuantMethod kv("model.layers.0.self_attn", d);
    ASSERT_TRUE(kv.load("model.layers.0.self_attn.k_scale", scalar(0.5f)));
    kv.process_weights_after_loading();
    const std::vector<float> x = {0.0f, 1.0f, -3.0f, 100.0f, 1e6f};
    std::vector<uint8_t> q(x.size());
    std::vector<float> back(x.size());
    kv.quantize_k(x.data(), 5, q.data());
    kv.dequantize_k(q.data(), 5, back.data());
    EXPECT_EQ(back[0], 0.0f);
    EXPECT_EQ(back[1], 1.0f);
    EXPECT_EQ(back[2], -3.0f);
    const float max = d == KVCacheDType::Fp8E4M3 ? kE4M3Max : kE5M2Max;
    EXPECT_EQ(back[4], max * 0.5f);  // saturates
    EXPECT_NEAR(back[3], 100.0f, d == KVCacheDType::Fp8E4M3 ? 4.0f : 8.0f);
  }
}

TEST(KvCache, BadScalesNameTheLayer) {
  for (float bad : {std::nanf(""), 0.0f, -1.0f, INFINITY}) {
    KVCacheQuantMethod kv("model.layers.7.self_attn", KVCacheDType::Fp8E4M3);
    kv.load("model.layers.7.self_attn.v_scale", scalar(bad));
    EXPECT_QLM_ERROR(kv.process_weights_after_loading(), "kv_cache.scale", "model.layers.7.self_attn");
  }
  KVCacheQuantMethod kv("model.layers.7.self_attn", KVCacheDType::Fp8E4M3);
  EXPECT_QLM_ERROR(kv.load("model.layers.7.self_attn.k_scale", Tensor::from_vector(std::vector<float>(8, 1.f), {8, 1, 1})),
                   "kv_cache.scale_shape", "per-head");
  ModuleSet m;
  KVCacheQuantMethod via_loader("model.layers.0.self_attn", KVCacheDType::Fp8E4M3);
  via_loader.register_params(m);
  std::vector<std::pair<std::string, Tensor>> t = {
      {"model.layers.0.self_attn.k_scale", Tensor::from_vector(std::vector<float>(4, 1.f), {4})}};
  EXPECT_QLM_ERROR(load_tensors(t, m), "loader.shape", "k_scale");
}

}  // namespace
}  // namespace qlm
