// Causal GQA attention over the device KV cache. Each block runs one (query token, head) over a
// range of slots: its warps walk a strided share of the visible slots keeping an online softmax
// (running max m, sum l and the weighted V accumulator, lane i holding features i, i + 32, ...),
// then the warps' states are merged. All math in F32; K and V are read in their storage type (fp8
// included) and scaled by their kv head's scale.
//
// One block per (token, head) walks every visible slot: right for prefill, where tokens × heads
// blocks fill the GPU. A single decode token has only `heads` blocks, so with split_slots set the
// slots are cut into chunks of that many, one block per (head, chunk) writes its partial state
// (m, l, unnormalised accumulator) and a second kernel combines the chunks (flash-decoding).
// The chunk count comes from the host's bound on the slots (the cache capacity), so a CUDA graph
// captured at one capacity stays valid at every position; chunks past the last slot write l = 0.
#include <math.h>

#include "runtime/ops/cuda/elem.cuh"

namespace qlm::ops::cu {
namespace {

constexpr int kWarps = 8;
constexpr int kPerLane = static_cast<int>(kMaxAttentionHeadDim / 32);

// The online-softmax state of one block over slots [lo, hi] (inclusive; empty when lo > hi),
// merged over its warps: m, l and acc[i] for i < head_dim (rescaled to m). l = 0: no slot.
struct BlockState {
  float m, l;
  float* acc;  // shared memory, head_dim values
};

template <ElemType KV>
__device__ BlockState attend_slots(const AttentionArgs& a, const float* q, int64_t kv_head, int64_t lo, int64_t hi,
                                   float (&warp_acc)[kWarps][kMaxAttentionHeadDim], float* merged) {
  const int64_t d = a.head_dim, row = a.kv_heads * a.head_dim;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float m = -INFINITY, l = 0.0f;
  float acc[kPerLane];
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) acc[r] = 0.0f;
  const float score_scale = a.k_scales[kv_head] * a.scale;
  for (int64_t j = lo + warp; j <= hi; j += kWarps) {
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
  // Warps that saw no slot (l = 0) contribute nothing.
  BlockState st{-INFINITY, 0.0f, merged};
  for (int w = 0; w < kWarps; ++w)
    if (warp_l[w] > 0.0f) st.m = fmaxf(st.m, warp_m[w]);
  float weight[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = warp_l[w] > 0.0f ? expf(warp_m[w] - st.m) : 0.0f;
    st.l += warp_l[w] * weight[w];
  }
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (weight[w] > 0.0f) o += warp_acc[w][i] * weight[w];
    merged[i] = o;
  }
  __syncthreads();
  return st;
}

// The query of (token t, head h) into shared memory; the visible slots [first, last] of token t.
__device__ void load_query(const AttentionArgs& a, int64_t t, int64_t h, float* q, int64_t* first, int64_t* last) {
  const int64_t past = a.past_dev ? int64_t{*a.past_dev} : a.past;
  *last = past + t;
  *first = a.sliding_window > 0 && *last - a.sliding_window + 1 > 0 ? *last - a.sliding_window + 1 : 0;
  for (int64_t i = threadIdx.x; i < a.head_dim; i += blockDim.x) q[i] = a.q[t * a.q_stride + h * a.head_dim + i];
  __syncthreads();
}

template <ElemType KV, ElemType OUT>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(AttentionArgs a) {
  const int64_t t = blockIdx.x / a.heads, h = blockIdx.x % a.heads;
  const int64_t kv_head = h / (a.heads / a.kv_heads);
  __shared__ float q[kMaxAttentionHeadDim], merged[kMaxAttentionHeadDim];
  __shared__ float warp_acc[kWarps][kMaxAttentionHeadDim];
  int64_t first, last;
  load_query(a, t, h, q, &first, &last);
  // At least one slot (the query's own) is visible, so st.l > 0.
  const BlockState st = attend_slots<KV>(a, q, kv_head, first, last, warp_acc, merged);
  const float norm = a.v_scales[kv_head] / st.l;
  for (int64_t i = threadIdx.x; i < a.head_dim; i += blockDim.x)
    store_elem<OUT>(a.out, t * a.out_stride + h * a.head_dim + i, merged[i] * norm);
}

// Partial state of chunk c of head h, one query token: [m, l, acc[head_dim]] at
// partial[(h · chunks + c) · (2 + head_dim)].
template <ElemType KV>
__global__ void __launch_bounds__(kWarps * 32) attention_chunk_kernel(AttentionArgs a, int64_t chunks) {
  const int64_t h = blockIdx.x % a.heads, c = blockIdx.x / a.heads;
  const int64_t kv_head = h / (a.heads / a.kv_heads);
  __shared__ float q[kMaxAttentionHeadDim], merged[kMaxAttentionHeadDim];
  __shared__ float warp_acc[kWarps][kMaxAttentionHeadDim];
  int64_t first, last;
  load_query(a, 0, h, q, &first, &last);
  const int64_t lo = first > c * a.split_slots ? first : c * a.split_slots;
  const int64_t hi = last < (c + 1) * a.split_slots - 1 ? last : (c + 1) * a.split_slots - 1;
  const BlockState st = attend_slots<KV>(a, q, kv_head, lo, hi, warp_acc, merged);
  float* out = a.partial + (h * chunks + c) * (2 + a.head_dim);
  if (threadIdx.x == 0) {
    out[0] = st.m;
    out[1] = st.l;
  }
  for (int64_t i = threadIdx.x; i < a.head_dim; i += blockDim.x) out[2 + i] = st.l > 0.0f ? merged[i] : 0.0f;
}

// Combines the chunks of each head (one block per head): the softmax over every visible slot.
template <ElemType OUT>
__global__ void attention_combine_kernel(AttentionArgs a, int64_t chunks) {
  const int64_t h = blockIdx.x;
  const int64_t kv_head = h / (a.heads / a.kv_heads);
  const int64_t width = 2 + a.head_dim;
  const float* part = a.partial + h * chunks * width;
  float m = -INFINITY;
  for (int64_t c = 0; c < chunks; ++c)
    if (part[c * width + 1] > 0.0f) m = fmaxf(m, part[c * width]);
  float l = 0.0f;
  for (int64_t c = 0; c < chunks; ++c)
    if (part[c * width + 1] > 0.0f) l += part[c * width + 1] * expf(part[c * width] - m);
  const float norm = a.v_scales[kv_head] / l;  // l > 0: the query's own slot is visible
  for (int64_t i = threadIdx.x; i < a.head_dim; i += blockDim.x) {
    float o = 0.0f;
    for (int64_t c = 0; c < chunks; ++c)
      if (part[c * width + 1] > 0.0f) o += part[c * width + 2 + i] * expf(part[c * width] - m);
    store_elem<OUT>(a.out, h * a.head_dim + i, o * norm);
  }
}

}  // namespace

int64_t attention_chunks(int64_t tokens, int64_t slots_bound) {
  if (tokens != 1 || slots_bound <= kAttentionChunkSlots) return 0;
  return (slots_bound + kAttentionChunkSlots - 1) / kAttentionChunkSlots;
}

cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.tokens == 0) return cudaSuccess;
  if (a.head_dim <= 0 || a.head_dim > kMaxAttentionHeadDim || a.kv_heads <= 0 || a.heads % a.kv_heads != 0 ||
      a.tokens * a.heads > int64_t{0x7fffffff})
    return cudaErrorInvalidValue;
  const int64_t chunks = a.split_slots > 0 && a.tokens == 1 ? a.chunks : 0;  // else one block per (token, head)
  if (chunks > 0 && (a.partial == nullptr || chunks * a.heads > int64_t{0x7fffffff})) return cudaErrorInvalidValue;
  cudaError_t status = cudaSuccess;
  const cudaError_t dispatched = dispatch_kv(a.kv_type, [&](auto kv_tag) {
    status = dispatch(a.out_type, [&](auto out_tag) {
      constexpr ElemType KV = decltype(kv_tag)::value, OUT = decltype(out_tag)::value;
      if (chunks > 0) {
        attention_chunk_kernel<KV><<<static_cast<unsigned>(chunks * a.heads), kWarps * 32, 0, stream>>>(a, chunks);
        attention_combine_kernel<OUT><<<static_cast<unsigned>(a.heads), 128, 0, stream>>>(a, chunks);
      } else {
        attention_kernel<KV, OUT><<<static_cast<unsigned>(a.tokens * a.heads), kWarps * 32, 0, stream>>>(a);
      }
    });
  });
  return dispatched != cudaSuccess ? dispatched : status;
}

}  // namespace qlm::ops::cu
