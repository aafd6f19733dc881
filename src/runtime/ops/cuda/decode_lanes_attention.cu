// Decode attention, lanes form (AttentionForm::DecodeLanes): one query token, one block per (kv head, chunk)
// serving every query head of the kv head's group, as the decode form (attention.cu) does, but with the
// work of a few slots spread over the whole block. The decode form gives each thread one slot's whole K
// row, so with a short context one warp computes every score while the others wait; here a team of lanes
// (a power of two covering the row's vectors) takes one slot, lane i its vector i, and the eight warps take
// the chunk's slots in turn (step i, warp w, team t: slot lo + (8 i + w) · slots per warp + t). Phases:
//   (0) the slot count, the group's queries and both scales in flight together; then every lane's first
//       kLanesBatch steps of K and V vectors, before any math;
//   (1) scores: per step each lane's vector against every query of the group, summed over its team by
//       shuffles; a lane of the team writes the slot's scores to shared memory;
//   (2) softmax over the chunk's visible slots, one warp per query head;
//   (3) p · v per lane over its steps' slots, summed over the teams of a warp by shuffles, then over the
//       eight warps in a fixed order by one thread per output feature (the same result on every run).
// Shared memory holds the eight warps' sums of every feature of the group, so the group's queries may
// hold at most kLanesMaxGroupDims features (attention_form checks it).
#include <math.h>

#include "core/env_switch.h"
#include "runtime/ops/cuda/attention_kv.cuh"

namespace qlm::ops::cu {
namespace {

constexpr int kLanesThreads = 256;
constexpr int kLanesWarps = kLanesThreads / 32;
constexpr int kLanesBatch = 4;  // steps whose K (or V) vectors a lane has in flight at once
constexpr int C = static_cast<int>(kAttentionChunkSlots);
static_assert(kLanesMaxGroup <= kLanesWarps, "phase 2 takes one warp per query head");
static_assert(kLanesMaxGroupDims % kLanesThreads == 0);

// Block (kv head kvh, part p of `splits`, chunk c): query heads kvh·group + p·G .. + G - 1 with G = group / splits.
template <ElemType KV, ElemType OUT, int G_MAX>
__global__ void __launch_bounds__(kLanesThreads) decode_lanes_kernel(AttentionArgs a, int64_t chunks, int splits) {
  pdl_enter();
  static_assert(G_MAX >= 1 && G_MAX <= kLanesMaxGroup);
  using T = typename KvVec<KV>::T;
  using Raw = typename KvVec<KV>::Raw;
  constexpr int E = KvVec<KV>::E;
  // Vectors per lane at most: a row of kMaxAttentionHeadDim has 256 / E vectors over a warp's 32 lanes.
  constexpr int kVpl = (static_cast<int>(kMaxAttentionHeadDim) / E + 31) / 32;
  const int64_t kvh = blockIdx.x % a.kv_heads, group_part = blockIdx.x / a.kv_heads % splits;
  const int64_t c = blockIdx.x / a.kv_heads / splits;
  const int G = static_cast<int>(a.heads / a.kv_heads) / splits;
  const int64_t h0 = kvh * G * splits + group_part * G;  // the block's first query head
  const int d = static_cast<int>(a.head_dim), RC = d / E, GD = G * d;
  const int64_t row = a.kv_heads * a.head_dim;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  int TL = 1;  // lanes per slot: a power of two >= RC, at most a warp (then kVpl vectors a lane)
  while (TL < RC && TL < 32) TL *= 2;
  const int SPW = 32 / TL, team = lane / TL, lt = lane % TL;
  const int SB = kLanesWarps * SPW;  // slots per block step

  __shared__ __align__(16) float qs[kLanesMaxGroupDims];                 // the group's queries, head after head
  __shared__ float ps[G_MAX][C];                                         // scores, then exp(score - m)
  __shared__ __align__(16) float part[kLanesWarps][kLanesMaxGroupDims];  // each warp's p · v sums
  __shared__ float head_m[G_MAX], head_l[G_MAX];

  // (0) The slot count (a device int in a graph's step), the group's queries and both scales, in flight together.
  const int64_t past = past_of(a);
  constexpr int kQPerThread = kLanesMaxGroupDims / kLanesThreads;
  const float* q = a.q + h0 * a.head_dim;  // token 0: heads h0.. are adjacent
  float qv[kQPerThread];
#pragma unroll
  for (int r = 0; r < kQPerThread; ++r) qv[r] = tid + r * kLanesThreads < GD ? q[tid + r * kLanesThreads] : 0.0f;
  const float score_scale = a.k_scales[kvh] * a.scale, v_scale = a.v_scales[kvh];
  int64_t first, last;
  visible_slots(a, past, 0, &first, &last);
  const int64_t c0 = c * C;
  const int64_t lo = first > c0 ? first : c0, hi = last < c0 + C - 1 ? last : c0 + C - 1;
  if (lo > hi) return;  // no visible slot (never with chunks == 0): the combine reads only chunks that hold one
  const int steps = static_cast<int>((hi - lo + 1 + SB - 1) / SB);
  const auto slot_of = [&](int step) { return lo + int64_t{step} * SB + warp * SPW + team; };

  // This lane's vectors of the K (or V) rows of steps i0 .. i0 + kLanesBatch - 1; slots past hi are not read.
  const T* kbase = static_cast<const T*>(a.k) + kvh * a.head_dim;
  const T* vbase = static_cast<const T*>(a.v) + kvh * a.head_dim;
  Raw kraw[kLanesBatch][kVpl], vraw[kLanesBatch][kVpl];
  const auto load_rows = [&](const T* base, Raw(&raw)[kLanesBatch][kVpl], int i0) {
#pragma unroll
    for (int u = 0; u < kLanesBatch; ++u) {
      const int64_t s = slot_of(i0 + u);
#pragma unroll
      for (int v = 0; v < kVpl; ++v)
        if (s <= hi && lt + v * TL < RC) raw[u][v] = load_kv_raw<KV>(base + s * row + (lt + v * TL) * E);
    }
  };
  load_rows(kbase, kraw, 0);
  load_rows(vbase, vraw, 0);
#pragma unroll
  for (int r = 0; r < kQPerThread; ++r)
    if (tid + r * kLanesThreads < GD) qs[tid + r * kLanesThreads] = qv[r];
  __syncthreads();

  // (1) Scores of every visible slot against every query of the group into ps[g][slot - lo].
  for (int i0 = 0; i0 < steps; i0 += kLanesBatch) {
    if (i0 > 0) load_rows(kbase, kraw, i0);
#pragma unroll
    for (int u = 0; u < kLanesBatch; ++u) {
      if (i0 + u >= steps) break;  // the same for the whole block: the shuffles below see every lane
      const int64_t s = slot_of(i0 + u);
      float dot[G_MAX];
#pragma unroll
      for (int g = 0; g < G_MAX; ++g) dot[g] = 0.0f;
#pragma unroll
      for (int v = 0; v < kVpl; ++v) {
        const int vec = lt + v * TL;
        if (s > hi || vec >= RC) continue;
        add_query_dots<KV>(kraw[u][v], qs, d, vec, G, dot);
      }
      for (int offset = TL / 2; offset > 0; offset /= 2)  // within the team: teams are aligned runs of TL lanes
#pragma unroll
        for (int g = 0; g < G_MAX; ++g) dot[g] += __shfl_xor_sync(0xffffffffu, dot[g], offset);
      if (s <= hi) {
#pragma unroll
        for (int g = 0; g < G_MAX; ++g)
          if (g < G && g % TL == lt) ps[g][s - lo] = dot[g] * score_scale;
      }
    }
  }
  __syncthreads();

  // (2) Softmax over the visible slots: warp g takes head g.
  const int n = static_cast<int>(hi - lo + 1);
  if (warp < G) warp_softmax_in_place(ps[warp], n, &head_m[warp], &head_l[warp]);
  __syncthreads();

  // (3) Each lane's p · v over its steps' slots, per query head of the group.
  float acc[G_MAX][kVpl][E];
#pragma unroll
  for (int g = 0; g < G_MAX; ++g)
#pragma unroll
    for (int v = 0; v < kVpl; ++v)
#pragma unroll
      for (int k = 0; k < E; ++k) acc[g][v][k] = 0.0f;
  for (int i0 = 0; i0 < steps; i0 += kLanesBatch) {
    if (i0 > 0) load_rows(vbase, vraw, i0);
#pragma unroll
    for (int u = 0; u < kLanesBatch; ++u) {
      const int64_t s = slot_of(i0 + u);
      if (i0 + u >= steps || s > hi) break;  // later steps' slots of this lane lie further past hi
      const int t = static_cast<int>(s - lo);
#pragma unroll
      for (int v = 0; v < kVpl; ++v) {
        if (lt + v * TL >= RC) continue;
        float vv[E];
        kv_raw_to_floats<KV>(vraw[u][v], vv);
#pragma unroll
        for (int g = 0; g < G_MAX; ++g) {
          if (g >= G) break;
          const float p = ps[g][t];
#pragma unroll
          for (int k = 0; k < E; ++k) acc[g][v][k] += p * vv[k];
        }
      }
    }
  }
  // Sum over the warp's teams (lane lt of every team holds the same vectors), then team 0 writes the warp's row.
  for (int offset = 16; offset >= TL; offset /= 2)
#pragma unroll
    for (int g = 0; g < G_MAX; ++g)
#pragma unroll
      for (int v = 0; v < kVpl; ++v)
#pragma unroll
        for (int k = 0; k < E; ++k) acc[g][v][k] += __shfl_xor_sync(0xffffffffu, acc[g][v][k], offset);
  if (team == 0) {
#pragma unroll
    for (int g = 0; g < G_MAX; ++g) {
      if (g >= G) break;
#pragma unroll
      for (int v = 0; v < kVpl; ++v) {
        const int vec = lt + v * TL;
        if (vec >= RC) continue;
        float4* dst = reinterpret_cast<float4*>(&part[warp][g * d + vec * E]);
#pragma unroll
        for (int k4 = 0; k4 < E / 4; ++k4)
          dst[k4] = make_float4(acc[g][v][4 * k4], acc[g][v][4 * k4 + 1], acc[g][v][4 * k4 + 2], acc[g][v][4 * k4 + 3]);
      }
    }
  }
  __syncthreads();

  // Feature i of head g: the warps' sums in order.
  for (int idx = tid; idx < GD; idx += kLanesThreads) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kLanesWarps; ++w) o += part[w][idx];
    const int g = idx / d, i = idx - g * d;
    const int64_t h = h0 + g;
    const float l = head_l[g];
    if (chunks == 0) {
      store_elem<OUT>(a.out, h * a.head_dim + i, o * (v_scale / l));  // l > 0: the query's own slot
    } else {
      a.partial[(h * chunks + c) * (2 + a.head_dim) + 2 + i] = l > 0.0f ? o : 0.0f;
    }
  }
  if (chunks > 0 && tid < G) {
    float* out = a.partial + ((h0 + tid) * chunks + c) * (2 + a.head_dim);
    out[0] = head_m[tid];
    out[1] = head_l[tid];
  }
}

}  // namespace

int decode_lanes_splits(const AttentionArgs& a, int64_t chunks) {
  const int64_t group = a.heads / a.kv_heads;
  static const int64_t forced = env_int("QLM_ATTENTION_LANES_SPLIT", 0);
  const int64_t want = forced > 0 ? forced : chunks == 0 && group > 4 ? 2 : 1;
  return want == 2 && group % 2 == 0 ? 2 : 1;
}

cudaError_t launch_decode_lanes(const AttentionArgs& a, int64_t chunks, cudaStream_t stream) {
  const int splits = decode_lanes_splits(a, chunks);
  const unsigned grid = static_cast<unsigned>((chunks > 0 ? chunks : 1) * splits * a.kv_heads);
  const bool small_group = a.heads / a.kv_heads / splits <= 4;
  cudaError_t status = cudaSuccess;
  const cudaError_t dispatched = dispatch_kv(a.kv_type, [&](auto kv_tag) {
    status = dispatch(a.out_type, [&](auto out_tag) {
      constexpr ElemType KV = decltype(kv_tag)::value, OUT = decltype(out_tag)::value;
      if (small_group)
        launch_pdl(decode_lanes_kernel<KV, OUT, 4>, grid, kLanesThreads, 0, stream, a, chunks, splits);
      else
        launch_pdl(decode_lanes_kernel<KV, OUT, kLanesMaxGroup>, grid, kLanesThreads, 0, stream, a, chunks, splits);
    });
  });
  return dispatched != cudaSuccess ? dispatched : status;
}

}  // namespace qlm::ops::cu
