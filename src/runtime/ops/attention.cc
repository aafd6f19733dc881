#include "runtime/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/float_convert.h"
#include "core/thread_pool.h"

namespace qlm::ops {

namespace {

template <KvDType D>
float load(const void* base, int64_t i) {
  if constexpr (D == KvDType::F32) return static_cast<const float*>(base)[i];
  if constexpr (D == KvDType::F16) return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
  if constexpr (D == KvDType::BF16) return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
  if constexpr (D == KvDType::F8E4M3) return e4m3_to_f32(static_cast<const uint8_t*>(base)[i]);
  if constexpr (D == KvDType::F8E5M2) return e5m2_to_f32(static_cast<const uint8_t*>(base)[i]);
}

template <KvDType D>
void attend_one(const float* q, const KvCache& cache, int64_t layer, int64_t kv_head, int64_t first, int64_t last,
                const AttentionParams& p, float* out, std::vector<float>& scores) {
  const int64_t d = p.head_dim, row = cache.kv_heads() * d;
  const void* kd = cache.k_data(layer);
  const void* vd = cache.v_data(layer);
  const float k_scale = cache.k_scale(layer, kv_head), v_scale = cache.v_scale(layer, kv_head);
  const int64_t n = last - first + 1;
  scores.resize(static_cast<size_t>(n));
  float max_score = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t base = (first + j) * row + kv_head * d;
    float dot = 0;
    for (int64_t i = 0; i < d; ++i) dot += q[i] * load<D>(kd, base + i);
    const float s = dot * k_scale * p.scale;
    scores[static_cast<size_t>(j)] = s;
    max_score = std::max(max_score, s);
  }
  float sum = 0;
  for (float& s : scores) {
    s = std::exp(s - max_score);
    sum += s;
  }
  const float norm = v_scale / sum;
  std::fill(out, out + d, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t base = (first + j) * row + kv_head * d;
    const float w = scores[static_cast<size_t>(j)];
    for (int64_t i = 0; i < d; ++i) out[i] += w * load<D>(vd, base + i);
  }
  for (int64_t i = 0; i < d; ++i) out[i] *= norm;
}

template <KvDType D>
void attention_impl(const float* q, int64_t q_stride, int64_t tokens, int64_t past, const KvCache& cache,
                    int64_t layer, const AttentionParams& p, float* out, int64_t out_stride) {
  const int64_t group = p.heads / p.kv_heads;
  auto task = [&](int64_t index) {
    thread_local std::vector<float> scores;
    const int64_t t = index / p.heads, h = index % p.heads;
    const int64_t last = past + t;
    const int64_t first = p.sliding_window > 0 ? std::max<int64_t>(0, last - p.sliding_window + 1) : 0;
    attend_one<D>(q + t * q_stride + h * p.head_dim, cache, layer, h / group, first, last, p,
                  out + t * out_stride + h * p.head_dim, scores);
  };
  const int64_t tasks = tokens * p.heads;
  const int64_t work = tasks * (past + tokens) * p.head_dim;
  if (work < (1 << 15)) {
    for (int64_t i = 0; i < tasks; ++i) task(i);
    return;
  }
  compute_pool().run(tasks, task);
}

}  // namespace

void attention(const float* q, int64_t q_stride, int64_t tokens, int64_t past, const KvCache& cache, int64_t layer,
               const AttentionParams& p, float* out, int64_t out_stride) {
  QLM_CHECK(p.kv_heads > 0 && p.heads % p.kv_heads == 0 && p.kv_heads == cache.kv_heads() &&
            p.head_dim == cache.head_dim());
  QLM_CHECK(past >= 0 && past + tokens <= cache.capacity());
  switch (cache.encoding().dtype) {
    case KvDType::F32: return attention_impl<KvDType::F32>(q, q_stride, tokens, past, cache, layer, p, out, out_stride);
    case KvDType::F16: return attention_impl<KvDType::F16>(q, q_stride, tokens, past, cache, layer, p, out, out_stride);
    case KvDType::BF16:
      return attention_impl<KvDType::BF16>(q, q_stride, tokens, past, cache, layer, p, out, out_stride);
    case KvDType::F8E4M3:
      return attention_impl<KvDType::F8E4M3>(q, q_stride, tokens, past, cache, layer, p, out, out_stride);
    case KvDType::F8E5M2:
      return attention_impl<KvDType::F8E5M2>(q, q_stride, tokens, past, cache, layer, p, out, out_stride);
  }
}

}  // namespace qlm::ops
