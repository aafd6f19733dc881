// bench/synthetic_checkpoint.h (what `qlm bench-decode synthetic:...` writes) on small shapes: each format loads as
// the format it claims to be, on the kernels that format gets, and runs.
#include "bench/synthetic_checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "runtime/model.h"
#include "support/temp_dir.h"

namespace qlm {
namespace {

bench::SyntheticShape small_llama(bench::SyntheticFormat format) {
  return bench::SyntheticShape{.hidden = 256,
                               .intermediate = 512,
                               .layers = 2,
                               .heads = 4,
                               .kv_heads = 2,
                               .vocab = 384,
                               .group = 128,
                               .format = format};
}

bench::SyntheticShape small_moe(bench::SyntheticFormat format) {
  bench::SyntheticShape s = small_llama(format);
  s.experts = 8;
  s.top_k = 2;
  s.moe_intermediate = 128;
  s.head_dim = 64;
  return s;
}

void expect_finite_logits(runtime::Model& model) {
  const std::vector<int32_t> prompt = {1, 17, 42, 5};
  const Tensor logits = model.forward(prompt, false);
  ASSERT_EQ(logits.numel(), model.vocab_size());
  for (float v : logits.span<float>()) ASSERT_TRUE(std::isfinite(v));
}

// Every linear layer but lm_head and the MoE router loads as `method`; those two stay unquantized.
void expect_w8a8_plan(const runtime::Model& model, bool moe, const std::string& method) {
  bool saw_quantized = false, saw_router = false;
  for (const runtime::LayerPlan& layer : model.plan().layers) {
    const bool router = layer.layer.ends_with(".mlp.gate");
    if (router) saw_router = true;
    if (layer.layer == "lm_head" || router) {
      EXPECT_EQ(layer.format, "unquantized") << layer.layer << ": " << layer.method;
    } else {
      EXPECT_EQ(layer.method, method) << layer.layer;
      saw_quantized = true;
    }
  }
  EXPECT_TRUE(saw_quantized) << model.plan().summary();
  EXPECT_EQ(saw_router, moe) << model.plan().summary();
  EXPECT_EQ(model.plan().moe.size(), moe ? 2u : 0u);
}

TEST(SyntheticCheckpoint, Fp8DynamicLoadsAsCompressedTensorsFp8) {
  for (const bool moe : {false, true}) {
    SCOPED_TRACE(moe ? "qwen3-moe" : "llama");
    testing::TempDir dir;
    const bench::SyntheticShape s =
        moe ? small_moe(bench::SyntheticFormat::Fp8Dynamic) : small_llama(bench::SyntheticFormat::Fp8Dynamic);
    bench::write_synthetic_checkpoint(dir.path(), s);
    // Every code is a finite e4m3 value in [0.25, 3.75] in magnitude: exponent field 5-8, never NaN.
    const io::SafetensorsFile shard = io::SafetensorsFile::open(dir.path() / bench::synthetic_shard_name(0, 3));
    const io::TensorInfo& q = shard.info("model.layers.0.self_attn.q_proj.weight");
    EXPECT_EQ(q.dtype, DType::F8_E4M3);
    EXPECT_EQ(q.shape, (Shape{s.heads * s.head_size(), s.hidden}));
    int exponents[16] = {};
    for (std::byte b : shard.data(q)) ++exponents[(std::to_integer<int>(b) >> 3) & 15];
    for (int e = 0; e < 16; ++e) {
      if (e >= 5 && e <= 8) {
        EXPECT_GT(exponents[e], 0) << "exponent field " << e;
      } else {
        EXPECT_EQ(exponents[e], 0) << "exponent field " << e;
      }
    }
    const io::TensorInfo& scale = shard.info("model.layers.0.self_attn.q_proj.weight_scale");
    EXPECT_EQ(scale.dtype, DType::BF16);
    EXPECT_EQ(scale.shape, (Shape{s.heads * s.head_size(), 1}));

    auto model = runtime::Model::load(dir.path());
    expect_w8a8_plan(*model, moe, "compressed-tensors fp8_e4m3 w=channel act=dynamic_token");
    expect_finite_logits(*model);
  }
}

TEST(SyntheticCheckpoint, Int8DynamicLoadsAsCompressedTensorsInt8) {
  for (const bool moe : {false, true}) {
    SCOPED_TRACE(moe ? "qwen3-moe" : "llama");
    testing::TempDir dir;
    const bench::SyntheticShape s =
        moe ? small_moe(bench::SyntheticFormat::Int8Dynamic) : small_llama(bench::SyntheticFormat::Int8Dynamic);
    bench::write_synthetic_checkpoint(dir.path(), s);
    const io::SafetensorsFile shard = io::SafetensorsFile::open(dir.path() / bench::synthetic_shard_name(0, 3));
    const io::TensorInfo& q = shard.info("model.layers.0.self_attn.o_proj.weight");
    EXPECT_EQ(q.dtype, DType::I8);
    // Codes cover both ends of the range and both signs.
    int lo = 0, hi = 0;
    for (std::byte b : shard.data(q)) {
      const int v = static_cast<int8_t>(std::to_integer<uint8_t>(b));
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    EXPECT_EQ(lo, -128);
    EXPECT_EQ(hi, 127);
    const io::TensorInfo& scale = shard.info("model.layers.0.self_attn.o_proj.weight_scale");
    EXPECT_EQ(scale.dtype, DType::BF16);
    EXPECT_EQ(scale.shape, (Shape{q.shape[0], 1}));

    auto model = runtime::Model::load(dir.path());
    expect_w8a8_plan(*model, moe, "compressed-tensors int8 w=channel act=dynamic_token");
    expect_finite_logits(*model);
  }
}

TEST(SyntheticCheckpoint, GptqLoadsAsGptqWithLmHeadQuantized) {
  testing::TempDir dir;
  bench::write_synthetic_checkpoint(dir.path(), small_llama(bench::SyntheticFormat::Gptq4));
  auto model = runtime::Model::load(dir.path());
  for (const runtime::LayerPlan& layer : model->plan().layers)
    EXPECT_EQ(layer.format, "gptq") << layer.layer << ": " << layer.method;
  expect_finite_logits(*model);
}

}  // namespace
}  // namespace qlm
