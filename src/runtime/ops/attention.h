// Causal grouped-query attention of new tokens over a KV cache (scaled dot product, softmax in
// fp32, optional sliding window as in Mistral / Qwen: a query attends the `sliding_window` most
// recent slots, itself included).
#pragma once

#include <cstdint>

#include "runtime/ops/kv_cache.h"

namespace qlm::ops {

struct AttentionParams {
  int64_t heads = 0;     // query heads (this rank)
  int64_t kv_heads = 0;  // key/value heads (this rank); heads is a multiple
  int64_t head_dim = 0;
  float scale = 1.0f;          // usually head_dim^-0.5
  int64_t sliding_window = 0;  // 0: none
};

// Query t (row q + t·q_stride, heads × head_dim) sits at slot past + t and attends slots up to and
// including its own; the cache must already hold K/V for slots [0, past + tokens) of `layer`
// (written, not necessarily committed). out rows: heads × head_dim, out_stride apart.
void attention(const float* q, int64_t q_stride, int64_t tokens, int64_t past, const KvCache& cache, int64_t layer,
               const AttentionParams& params, float* out, int64_t out_stride);

}  // namespace qlm::ops
