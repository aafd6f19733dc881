// Grouped-query attention over the KV cache against a double-precision reference (causal mask,
// sliding window, f16/bf16 storage), and whole models: decoding token by token with the KV cache
// gives the logits of one full-sequence forward.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "models/model_fixtures.h"
#include "runtime/model.h"
#include "runtime/ops/attention.h"
#include "support/expect_error.h"

namespace qlm {
namespace {

using ops::AttentionParams;
using ops::KvCache;
using ops::KvDType;

float value(int64_t i, float freq) { return std::sin(freq * static_cast<float>(i)) * 1.5f; }

// out[t, h, :] = softmax_j(q·k_j · scale) · v_j over the visible slots j, in double.
std::vector<double> reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                              int64_t T, int64_t past, const AttentionParams& p) {
  const int64_t d = p.head_dim, group = p.heads / p.kv_heads;
  std::vector<double> out(static_cast<size_t>(T * p.heads * d), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < p.heads; ++h) {
      const int64_t last = past + t;
      const int64_t first = p.sliding_window ? std::max<int64_t>(0, last - p.sliding_window + 1) : 0;
      std::vector<double> s;
      double mx = -1e300;
      for (int64_t j = first; j <= last; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i)
          dot += static_cast<double>(q[(t * p.heads + h) * d + i]) * k[(j * p.kv_heads + h / group) * d + i];
        s.push_back(dot * p.scale);
        mx = std::max(mx, s.back());
      }
      double sum = 0;
      for (double& x : s) sum += x = std::exp(x - mx);
      for (int64_t j = first; j <= last; ++j)
        for (int64_t i = 0; i < d; ++i)
          out[(t * p.heads + h) * d + i] += s[j - first] / sum * v[(j * p.kv_heads + h / group) * d + i];
    }
  return out;
}

void check_attention(KvDType dtype, int64_t window, double tolerance) {
  const AttentionParams p{.heads = 6, .kv_heads = 2, .head_dim = 8, .scale = 1.0f / std::sqrt(8.0f),
                          .sliding_window = window};
  const int64_t past = 5, T = 7, slots = past + T, row = p.kv_heads * p.head_dim;
  std::vector<float> k(static_cast<size_t>(slots * row)), v(k.size()), q(static_cast<size_t>(T * p.heads * p.head_dim));
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = value(static_cast<int64_t>(i), 0.31f);
    v[i] = value(static_cast<int64_t>(i), 0.17f);
  }
  for (size_t i = 0; i < q.size(); ++i) q[i] = value(static_cast<int64_t>(i), 0.23f);
  KvCache cache(/*layers=*/2, p.kv_heads, p.head_dim, {.dtype = dtype});
  cache.reserve(slots);
  cache.write(1, 0, k.data(), v.data(), past, row);
  cache.commit(past);
  cache.write(1, past, k.data() + past * row, v.data() + past * row, T, row);
  std::vector<float> out(q.size());
  ops::attention(q.data(), p.heads * p.head_dim, T, past, cache, 1, p, out.data(), p.heads * p.head_dim);
  const std::vector<double> want = reference(q, k, v, T, past, p);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], want[i], tolerance) << ops::kv_dtype_name(dtype) << " i=" << i;
}

TEST(Attention, GqaCausalMatchesReference) { check_attention(KvDType::F32, 0, 1e-5); }
TEST(Attention, SlidingWindowMatchesReference) { check_attention(KvDType::F32, 3, 1e-5); }
TEST(Attention, HalfPrecisionCacheIsClose) {
  check_attention(KvDType::F16, 0, 5e-3);
  check_attention(KvDType::BF16, 0, 3e-2);
}

TEST(Attention, ScaledCacheMatchesUnscaled) {
  // Per-layer scales divide on write and multiply on read: with exact F32 storage and power-of-two
  // scales the result is unchanged.
  const AttentionParams p{.heads = 2, .kv_heads = 1, .head_dim = 4, .scale = 0.5f, .sliding_window = 0};
  std::vector<float> k(12), v(12), q(8);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = value(static_cast<int64_t>(i), 0.3f);
    v[i] = value(static_cast<int64_t>(i), 0.7f);
  }
  for (size_t i = 0; i < q.size(); ++i) q[i] = value(static_cast<int64_t>(i), 0.9f);
  std::vector<float> plain(8), scaled(8);
  for (auto [out, ks] : {std::pair{&plain, 1.0f}, std::pair{&scaled, 4.0f}}) {
    KvCache cache(1, 1, 4);
    cache.set_scales(0, ks, 0.25f * ks);
    cache.reserve(3);
    cache.write(0, 0, k.data(), v.data(), 3, 4);
    ops::attention(q.data(), 8, 1, 2, cache, 0, p, out->data(), 8);
  }
  EXPECT_EQ(plain, scaled);
}

TEST(KvCacheStorage, GrowsAndKeepsContents) {
  KvCache cache(1, 1, 2);
  const float a[2] = {1, 2}, b[2] = {3, 4};
  cache.reserve(1);
  cache.write(0, 0, a, b, 1, 2);
  cache.commit(1);
  cache.reserve(100);
  EXPECT_GE(cache.capacity(), 100);
  EXPECT_EQ(static_cast<const float*>(cache.k_data(0))[1], 2.0f);
  EXPECT_EQ(static_cast<const float*>(cache.v_data(0))[0], 3.0f);
  cache.truncate(0);
  EXPECT_EQ(cache.length(), 0);
}

// Prefill of `split` tokens, then one token at a time: the logits of every step equal the rows of
// one full forward.
void check_incremental(const std::string& fixture, int tp, KVCacheDType kv, double tolerance) {
  const testing::ModelFixture f = testing::load_model_fixture(fixture);
  auto model = runtime::Model::load(f.dir, {.tp = tp, .kv_cache_dtype = kv});
  const Tensor full = model->forward(f.tokens);
  model->reset();
  const int64_t V = full.size(1), T = full.size(0), split = 5;
  std::span<const int32_t> tokens(f.tokens);
  Tensor step = model->forward(tokens.first(split));
  std::vector<float> got = step.to_float_vector();
  for (int64_t t = split; t < T; ++t) {
    Tensor one = model->forward(tokens.subspan(static_cast<size_t>(t), 1), /*all_logits=*/false);
    const std::vector<float> row = one.to_float_vector();
    got.insert(got.end(), row.begin(), row.end());
  }
  EXPECT_EQ(model->cache_length(), T);
  const Tensor incremental = Tensor::from_vector(got, {T, V});
  EXPECT_LE(testing::normwise_relative_error(incremental, full), tolerance) << fixture << " tp " << tp;
}

// (Not llama-dynamic: dynamic NTK rescales the frequencies with the longest position of each
// forward, so, as in transformers, cached keys keep the frequencies of the step that wrote them.)
TEST(IncrementalDecode, EqualsFullSequenceForward) {
  for (const char* fixture : {"llama-gqa", "mistral-swa", "qwen3-qknorm-gptq", "llama3-rope-bias", "qwen2-bias-tied"})
    for (int tp : {1, 2}) check_incremental(fixture, tp, KVCacheDType::F32, 1e-5);
}

TEST(IncrementalDecode, HalfPrecisionCacheStaysClose) {
  check_incremental("llama-gqa", 1, KVCacheDType::F16, 1e-2);
  check_incremental("llama-gqa", 1, KVCacheDType::BF16, 5e-2);
}

TEST(ModelForward, RejectsBadTokensAndPositions) {
  auto model = runtime::Model::load(testing::model_fixture_root() / "llama-gqa");
  const std::vector<int32_t> bad = {1, static_cast<int32_t>(model->vocab_size())};
  EXPECT_QLM_ERROR(model->forward(bad), "model.token", "outside the vocabulary");
  const std::vector<int32_t> ok = {1, 2};
  const std::vector<int64_t> positions = {3, 4};
  EXPECT_QLM_ERROR(model->forward(ok, positions), "model.positions", "next position is 0");
  EXPECT_EQ(model->cache_length(), 0);
}

}  // namespace
}  // namespace qlm
