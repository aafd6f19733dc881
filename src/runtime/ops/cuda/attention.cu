// Causal GQA attention over the device KV cache: one block per (query token, head). Each warp walks
// a strided share of the visible slots keeping an online softmax (running max m, sum l and the
// weighted V accumulator, lane i holding features i, i + 32, ...); the warps' states are merged at
// the end. All math in F32; K and V are read in their storage type (fp8 included) and scaled by
// their kv head's scale.
#include <math.h>

#include "runtime/ops/cuda/elem.cuh"

namespace qlm::ops::cu {
namespace {

constexpr int kWarps = 8;
constexpr int kPerLane = static_cast<int>(kMaxAttentionHeadDim / 32);

template <ElemType KV, ElemType OUT>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(AttentionArgs a) {
  const int64_t t = blockIdx.x / a.heads, h = blockIdx.x % a.heads;
  const int64_t kv_head = h / (a.heads / a.kv_heads);
  const int64_t d = a.head_dim, row = a.kv_heads * a.head_dim;
  const int64_t past = a.past_dev ? int64_t{*a.past_dev} : a.past;
  const int64_t last = past + t;
  const int64_t first = a.sliding_window > 0 && last - a.sliding_window + 1 > 0 ? last - a.sliding_window + 1 : 0;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  __shared__ float q[kMaxAttentionHeadDim];
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) q[i] = a.q[t * a.q_stride + h * d + i];
  __syncthreads();

  float m = -INFINITY, l = 0.0f;
  float acc[kPerLane];
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) acc[r] = 0.0f;
  const float score_scale = a.k_scales[kv_head] * a.scale;
  for (int64_t j = first + warp; j <= last; j += kWarps) {
    const int64_t base = j * row + kv_head * d;
    float dot = 0.0f;
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) {
      const int64_t i = lane + 32 * r;
      if (i < d) dot += q[i] * load_elem<KV>(a.k, base + i);
    }
    for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    const float s = dot * score_scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 for the first slot (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) {
      const int64_t i = lane + 32 * r;
      if (i < d) acc[r] = acc[r] * correction + p * load_elem<KV>(a.v, base + i);
    }
    m = m_new;
  }

  __shared__ float warp_m[kWarps], warp_l[kWarps];
  __shared__ float warp_acc[kWarps][kMaxAttentionHeadDim];
  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int64_t i = lane + 32 * r;
    if (i < d) warp_acc[warp][i] = acc[r];
  }
  __syncthreads();
  // At least one slot (the query's own) is visible, so some warp has l > 0 and max_m is finite;
  // warps that saw no slot (l = 0) contribute nothing.
  float max_m = -INFINITY;
  for (int w = 0; w < kWarps; ++w)
    if (warp_l[w] > 0.0f) max_m = fmaxf(max_m, warp_m[w]);
  float weight[kWarps];
  float sum = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = warp_l[w] > 0.0f ? expf(warp_m[w] - max_m) : 0.0f;
    sum += warp_l[w] * weight[w];
  }
  const float norm = a.v_scales[kv_head] / sum;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (weight[w] > 0.0f) o += warp_acc[w][i] * weight[w];
    store_elem<OUT>(a.out, t * a.out_stride + h * d + i, o * norm);
  }
}

}  // namespace

cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.tokens == 0) return cudaSuccess;
  if (a.head_dim <= 0 || a.head_dim > kMaxAttentionHeadDim || a.kv_heads <= 0 || a.heads % a.kv_heads != 0 ||
      a.tokens * a.heads > int64_t{0x7fffffff})
    return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(a.tokens * a.heads);
  cudaError_t status = cudaSuccess;
  const cudaError_t dispatched = dispatch_kv(a.kv_type, [&](auto kv_tag) {
    status = dispatch(a.out_type, [&](auto out_tag) {
      attention_kernel<decltype(kv_tag)::value, decltype(out_tag)::value><<<grid, kWarps * 32, 0, stream>>>(a);
    });
  });
  return dispatched != cudaSuccess ? dispatched : status;
}

}  // namespace qlm::ops::cu
