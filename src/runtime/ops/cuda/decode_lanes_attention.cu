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
// A chunk's slots may be shared by `parts` blocks, one thread-block cluster (decode_lanes_parts, sm_90): block sp
// takes the sp-th run of whole block steps through phases 0-3 with its own softmax state, and the cluster combines
// the parts through distributed shared memory (combine_cluster_parts) instead of a second kernel.
// Shared memory holds the eight warps' sums of every feature of the group, so the group's queries may
// hold at most kLanesMaxGroupDims features (attention_form checks it).
#include <cooperative_groups.h>
#include <math.h>

#include "core/env_switch.h"
#include "kernels/cuda/device_attribute.h"
#include "runtime/ops/cuda/attention_kv.cuh"

namespace qlm::ops::cu {
namespace {

constexpr int kLanesThreads = 256;
constexpr int kLanesWarps = kLanesThreads / 32;
constexpr int kLanesBatch = 4;  // steps whose K (or V) vectors a lane has in flight at once
constexpr int C = static_cast<int>(kAttentionChunkSlots);
static_assert(kLanesMaxGroup <= kLanesWarps, "phase 2 takes one warp per query head");
static_assert(kLanesMaxGroupDims % kLanesThreads == 0);

// The blocks of a cluster (parts > 1, sm_90) combined. Each block sums its warps' p · v into part[0] (its softmax
// state is in head_m / head_l); after the cluster's barrier block r finalizes features r·kLanesThreads + tid, stepping
// by parts·kLanesThreads, from every block's shared memory in rank order (the same result on every run): with m the
// largest m_r and w_r = exp(m_r - m) (0 for a part without slots), o = Σ w_r o_r and l = Σ w_r l_r. Each feature's
// thread reads the parts' m_r and l_r itself: computing the per-head weights once per block first (G threads, then a
// block barrier) measured 0.6-1.0 µs slower at 128-1023 slots (H100, session 46; the reads are latency, not
// traffic). The second barrier keeps each block's shared memory in place until the others have read it.
template <ElemType OUT>
__device__ void combine_cluster_parts(const AttentionArgs& a, int64_t chunks, int64_t c, int64_t h0, int GD,
                                      float v_scale, float (*part)[kLanesMaxGroupDims], float* head_m, float* head_l) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int tid = threadIdx.x;
  for (int idx = tid; idx < GD; idx += kLanesThreads) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kLanesWarps; ++w) o += part[w][idx];
    part[0][idx] = o;  // entry idx is this thread's alone here
  }
  cluster.sync();
  const int parts = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int d = static_cast<int>(a.head_dim);
  for (int idx = rank * kLanesThreads + tid; idx < GD; idx += parts * kLanesThreads) {
    const int g = idx / d, i = idx - g * d;
    float m = -INFINITY;
    for (int r = 0; r < parts; ++r) m = fmaxf(m, *cluster.map_shared_rank(head_m + g, r));
    float o = 0.0f, l = 0.0f;
    for (int r = 0; r < parts; ++r) {
      const float mr = *cluster.map_shared_rank(head_m + g, r);
      if (mr == -INFINITY) continue;  // a part without visible slots
      const float w = expf(mr - m);
      o += w * *cluster.map_shared_rank(&part[0][idx], r);
      l += w * *cluster.map_shared_rank(head_l + g, r);
    }
    const int64_t h = h0 + g;
    if (chunks == 0) {
      store_elem<OUT>(a.out, h * a.head_dim + i, o * (v_scale / l));  // l > 0: the query's own slot
    } else {
      float* out = a.partial + (h * chunks + c) * (2 + a.head_dim);
      out[2 + i] = l > 0.0f ? o : 0.0f;
      if (i == 0) {
        out[0] = m;
        out[1] = l;
      }
    }
  }
  cluster.sync();
#endif
}

// Block (slot part sp of `parts`, kv head kvh, group part p of `splits`, chunk c): query heads kvh·group + p·G ..
// + G - 1 with G = group / splits, over the sp-th of `parts` runs of whole block steps of the chunk's visible slots.
// parts > 1: the parts of a (kv head, group part, chunk) are one thread-block cluster (sm_90), which combines them.
// late_launch: the next kernel may launch only once every block has its p · v sums (before the combine and the
// output), instead of as soon as this kernel passed its wait: a W4A16 GEMM after it then starts streaming its weights
// during the combine, not during the score and value loads (default; QLM_ATTENTION_LATE_LAUNCH=0 the early launch;
// docs/cli.md: +0.4-0.7 % decode on an H100).
template <ElemType KV, ElemType OUT, int G_MAX>
__global__ void __launch_bounds__(kLanesThreads)
    decode_lanes_kernel(AttentionArgs a, int64_t chunks, int splits, int parts, bool late_launch) {
  if (late_launch) {
    wait_for_predecessor();
  } else {
    pdl_enter();
  }
  static_assert(G_MAX >= 1 && G_MAX <= kLanesMaxGroup);
  using T = typename KvVec<KV>::T;
  using Raw = typename KvVec<KV>::Raw;
  constexpr int E = KvVec<KV>::E;
  // Vectors per lane at most: a row of kMaxAttentionHeadDim has 256 / E vectors over a warp's 32 lanes.
  constexpr int kVpl = (static_cast<int>(kMaxAttentionHeadDim) / E + 31) / 32;
  const int sp = static_cast<int>(blockIdx.x % parts);
  const int64_t b = blockIdx.x / parts;
  const int64_t kvh = b % a.kv_heads, group_part = b / a.kv_heads % splits, c = b / a.kv_heads / splits;
  const int G = static_cast<int>(a.heads / a.kv_heads) / splits;
  const int64_t h0 = kvh * G * splits + group_part * G;  // the block's first query head
  const int d = static_cast<int>(a.head_dim), RC = d / E, GD = G * d;
  const int64_t row = a.kv_heads * a.head_dim;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int TL = lanes_per_slot(RC);  // at most a warp: then kVpl vectors a lane
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
  const int64_t chunk_lo = first > c0 ? first : c0, chunk_hi = last < c0 + C - 1 ? last : c0 + C - 1;
  // No visible slot in the chunk (never with chunks == 0; the same for every block of a cluster): the combine reads
  // only chunks that hold one.
  if (chunk_lo > chunk_hi) return;
  // This part's slots [lo, hi]: the sp-th run of part_steps whole block steps (empty when hi < lo).
  const int64_t chunk_steps = (chunk_hi - chunk_lo + SB) / SB, part_steps = (chunk_steps + parts - 1) / parts;
  const int64_t lo = chunk_lo + sp * part_steps * SB;
  const int64_t hi = lo + part_steps * SB - 1 < chunk_hi ? lo + part_steps * SB - 1 : chunk_hi;
  const int steps = hi >= lo ? static_cast<int>((hi - lo + SB) / SB) : 0;
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
  const int n = hi >= lo ? static_cast<int>(hi - lo + 1) : 0;
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
  if (late_launch) allow_dependents();

  if (parts > 1) {
    combine_cluster_parts<OUT>(a, chunks, c, h0, GD, v_scale, part, head_m, head_l);
    return;
  }
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

int decode_lanes_parts(const AttentionArgs& a, int64_t chunks) {
  static const int64_t forced = env_int("QLM_ATTENTION_LANES_PARTS", 0);
  if (forced > 0) return static_cast<int>(forced < kLanesMaxParts ? forced : kLanesMaxParts);
  // The slots one chunk's blocks may see: the whole chunk past one, else the capacity (or past + 1 without it).
  const int64_t bound = chunks > 0 ? kAttentionChunkSlots : a.slots_bound > 0 ? a.slots_bound : a.past + 1;
  const int64_t block_step =
      kLanesWarps * (32 / lanes_per_slot(static_cast<int>(a.head_dim) / kv_vector_elems(a.kv_type)));
  const int64_t steps = (bound + block_step - 1) / block_step;
  const int64_t parts = (steps + kLanesBatch - 1) / kLanesBatch;
  return static_cast<int>(parts < 1 ? 1 : parts > kLanesMaxParts ? kLanesMaxParts : parts);
}

cudaError_t launch_decode_lanes(const AttentionArgs& a, int64_t chunks, cudaStream_t stream) {
  const int splits = decode_lanes_splits(a, chunks);
  const int parts =
      qlm::cuda::current_device_attribute_at_least<cudaDevAttrClusterLaunch, 1>() ? decode_lanes_parts(a, chunks) : 1;
  const unsigned grid = static_cast<unsigned>((chunks > 0 ? chunks : 1) * splits * a.kv_heads * parts);
  const bool small_group = a.heads / a.kv_heads / splits <= 4;
  const bool pdl = qlm::cuda::pdl_launches();
  static const bool late_launch = env_switch_on("QLM_ATTENTION_LATE_LAUNCH");
  cudaError_t launched = cudaSuccess;
  const cudaError_t dispatched = dispatch_kv(a.kv_type, [&](auto kv_tag) {
    const cudaError_t out_type_known = dispatch(a.out_type, [&](auto out_tag) {
      constexpr ElemType KV = decltype(kv_tag)::value, OUT = decltype(out_tag)::value;
      const auto kernel = small_group ? decode_lanes_kernel<KV, OUT, 4> : decode_lanes_kernel<KV, OUT, kLanesMaxGroup>;
      launched = qlm::cuda::launch_pdl_cluster_if(pdl, static_cast<unsigned>(parts), kernel, grid, kLanesThreads, 0,
                                                  stream, a, chunks, splits, parts, late_launch);
    });
    if (out_type_known != cudaSuccess) launched = out_type_known;
  });
  return dispatched != cudaSuccess ? dispatched : launched;
}

}  // namespace qlm::ops::cu
