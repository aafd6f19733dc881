// What the attention kernels (attention.cu, decode_lanes_attention.cu) share: the visible slots of a query
// token, K / V rows read as vectors of their storage type, the query-K dot products, one warp's softmax, and the
// lanes form's launcher.
#pragma once

#include <math.h>

#include <type_traits>

#include "runtime/ops/cuda/elem.cuh"

namespace qlm::ops::cu {

// The slots before this call's tokens (a device int in a CUDA graph's decode step).
__device__ __forceinline__ int64_t past_of(const AttentionArgs& a) {
  return a.past_dev ? int64_t{*a.past_dev} : a.past;
}

// The visible slots [first, last] of query token t after `past` slots.
__device__ __forceinline__ void visible_slots(const AttentionArgs& a, int64_t past, int64_t t, int64_t* first,
                                              int64_t* last) {
  *last = past + t;
  *first = a.sliding_window > 0 && *last - a.sliding_window + 1 > 0 ? *last - a.sliding_window + 1 : 0;
}

// E consecutive stored elements per vector: 16 bytes (F32: 4, F16 / BF16: 8) or, for the fp8
// caches, 8 bytes (8 elements: 16 would need twice the accumulators of the V sums).
template <ElemType KV>
struct KvVec {
  using T = typename Elem<KV>::type;
  static constexpr int E = KV == ElemType::F32 ? 4 : 8;
  static constexpr int kBytes = E * static_cast<int>(sizeof(T));
  using Raw = std::conditional_t<kBytes == 16, uint4, uint2>;
  static_assert(kBytes == 16 || kBytes == 8);
};

// KvVec<KV>::E for a cache type known at run time (host).
inline int kv_vector_elems(ElemType kv) { return kv == ElemType::F32 ? 4 : 8; }

// The E elements at p as one load (p is a whole vector: rows and heads are whole vectors, checked by the
// host), then as floats.
template <ElemType KV>
__device__ __forceinline__ typename KvVec<KV>::Raw load_kv_raw(const typename KvVec<KV>::T* p) {
  return *reinterpret_cast<const typename KvVec<KV>::Raw*>(p);
}
template <ElemType KV>
__device__ __forceinline__ void kv_raw_to_floats(const typename KvVec<KV>::Raw& raw, float (&v)[KvVec<KV>::E]) {
  const typename KvVec<KV>::T* e = reinterpret_cast<const typename KvVec<KV>::T*>(&raw);
#pragma unroll
  for (int k = 0; k < KvVec<KV>::E; ++k) v[k] = Elem<KV>::load(e, k);
}

// dot[g] += query g · the K vector `raw` (vector `vec` of its row) for every g < G, with qs the group's G queries of
// d features each, head after head (shared memory, 16-byte aligned: d and vec·E are multiples of 4).
template <ElemType KV, int G_MAX>
__device__ __forceinline__ void add_query_dots(const typename KvVec<KV>::Raw& raw, const float* qs, int d, int vec,
                                               int G, float (&dot)[G_MAX]) {
  constexpr int E = KvVec<KV>::E;
  float kv[E];
  kv_raw_to_floats<KV>(raw, kv);
#pragma unroll
  for (int g = 0; g < G_MAX; ++g) {
    if (g >= G) break;
    const float4* qp = reinterpret_cast<const float4*>(qs + g * d + vec * E);
#pragma unroll
    for (int k4 = 0; k4 < E / 4; ++k4) {
      const float4 qq = qp[k4];
      dot[g] += qq.x * kv[4 * k4] + qq.y * kv[4 * k4 + 1] + qq.z * kv[4 * k4 + 2] + qq.w * kv[4 * k4 + 3];
    }
  }
}

// One warp's softmax of the scores p[0, n) in place: p[t] = exp(p[t] - m) with m their maximum (every p[t] = 0 when
// all are -inf: slots outside the visible ones), summed in a fixed order; lane 0 writes m and the sum l.
__device__ __forceinline__ void warp_softmax_in_place(float* p, int n, float* m_out, float* l_out) {
  const int lane = threadIdx.x % 32;
  float m = -INFINITY;
  for (int t = lane; t < n; t += 32) m = fmaxf(m, p[t]);
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  float l = 0.0f;
  for (int t = lane; t < n; t += 32) {
    const float e = m == -INFINITY ? 0.0f : expf(p[t] - m);
    p[t] = e;
    l += e;
  }
  for (int offset = 16; offset > 0; offset /= 2) l += __shfl_xor_sync(0xffffffffu, l, offset);
  if (lane == 0) {
    *m_out = m;
    *l_out = l;
  }
}

// The lanes form of decode attention (decode_lanes_attention.cu) serves groups of up to kLanesMaxGroup query
// heads whose queries together hold at most kLanesMaxGroupDims features (its shared memory holds the eight
// warps' sums of every one of them).
inline constexpr int kLanesMaxGroup = 8;
inline constexpr int kLanesMaxGroupDims = 1024;
// Lanes of the lanes form per slot for rows of `row_vectors` vectors: the least power of two covering them, at most a
// warp (whose lanes then take several vectors each).
__host__ __device__ constexpr int lanes_per_slot(int row_vectors) {
  int lanes = 1;
  while (lanes < row_vectors && lanes < 32) lanes *= 2;
  return lanes;
}
// One query token, one block per (kv head, part of its group, chunk); chunks == 0: the block is the only chunk and
// writes the output, else its partial state for attention_combine_kernel. The caller checked the shape
// (attention_form).
cudaError_t launch_decode_lanes(const AttentionArgs& a, int64_t chunks, cudaStream_t stream);
// The parts a kv head's query heads are split into, one block each (host): two for even groups of more than four
// heads (Llama-3-70B, Qwen3-30B-A3B: 8) within one chunk, where the kv heads alone give few blocks (4 or 8) and each
// block's work is the latency; else one. QLM_ATTENTION_LANES_SPLIT=1 or 2 forces it (even groups only split).
int decode_lanes_splits(const AttentionArgs& a, int64_t chunks);

}  // namespace qlm::ops::cu
