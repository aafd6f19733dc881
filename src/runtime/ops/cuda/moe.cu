// Mixture-of-experts routing kernels: softmax top-k router, grouping by expert, row gather, weighted
// combine, shared-expert gate. Declarations and contracts: moe_launch.h.
#include <cooperative_groups.h>

#include <algorithm>
#include <climits>

#include "kernels/cuda/device_attribute.h"
#include "kernels/cuda/vec_dot.cuh"
#include "runtime/ops/cuda/elem.cuh"
#include "runtime/ops/cuda/moe_launch.h"

namespace qlm::ops::cu {
namespace {

constexpr int kRouteWarps = 4;

// Router helpers. A float as an unsigned key in the same order (-inf lowest; NaN is mapped to -inf before; -0 is +0,
// so the two zeros tie as floats do), and back.
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k);
}
// The warp's largest (kMax) or smallest value: one redux instruction from sm_80 on.
template <bool kMax>
__device__ __forceinline__ uint32_t warp_extreme(uint32_t v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return kMax ? __reduce_max_sync(0xffffffffu, v) : __reduce_min_sync(0xffffffffu, v);
#else
  for (int off = 16; off > 0; off >>= 1) {
    const uint32_t o = __shfl_xor_sync(0xffffffffu, v, off);
    v = kMax ? max(v, o) : min(v, o);
  }
  return v;
#endif
}

// Logits a lane keeps in registers (its experts lane + 32 i for i below this: all of them up to 256 experts); the
// rest are read again from memory in every round.
constexpr int kRouteCached = 8;

// 16-bit logits (BF16 / F16 values, exact in F32) as one 32-bit candidate word: the value's 16-bit order key (-0 as
// +0) above 0xFFFF - expert, so the largest word is the largest logit and, among equal ones, the lowest expert id.
template <ElemType KT>
__device__ __forceinline__ uint32_t packed_candidate(float v, int e) {
  uint32_t b;
  if constexpr (KT == ElemType::BF16)
    b = __float_as_uint(v) >> 16;
  else
    b = __half_as_ushort(__float2half_rn(v));
  if ((b & 0x7FFFu) == 0u) b = 0u;
  const uint32_t key = (b & 0x8000u) ? (~b & 0xFFFFu) : (b | 0x8000u);
  return (key << 16) | (0xFFFFu - static_cast<uint32_t>(e));
}
template <ElemType KT>
__device__ __forceinline__ float packed_value(uint32_t word) {
  const uint32_t key = word >> 16;
  const uint32_t b = (key & 0x8000u) ? (key & 0x7FFFu) : (~key & 0xFFFFu);
  if constexpr (KT == ElemType::BF16)
    return __uint_as_float(b << 16);
  else
    return __half2float(__ushort_as_half(static_cast<unsigned short>(b)));
}

// Token t's experts and weights, by one warp. Lane l holds experts l, l + 32, ...; bit i of `taken` marks expert
// l + 32 i. NaN logits never win (they count as -inf); every token gets top_k distinct experts, in order of
// decreasing logit, ties to the lower expert id. Each round takes the warp's largest candidate: for 16-bit logits
// (KT BF16 / F16) one redux over packed_candidate words, for F32 two (the largest order key, then the lowest expert
// id holding it). The first round's winner is the largest logit, the softmax's shift.
// logit_of(e): token t's logit of expert e as a float, wherever the logits are (global memory, shared memory).
template <ElemType KT, typename LogitOf>
__device__ void route_token_with(LogitOf logit_of, int64_t t, int experts, int top_k, bool renormalize, int32_t* ids,
                                 float* weights, int64_t* probe = nullptr) {
  constexpr bool kPacked = KT == ElemType::BF16 || KT == ElemType::F16;
  // probe (investigation, MoeRouterRouteAlignArgs::probe): lane 0 writes the SM clock past each step.
  const auto stamp = [&](int i) {
    if (probe != nullptr && (threadIdx.x & 31) == 0) probe[i] = clock64();
  };
  const int lane = threadIdx.x & 31;
  auto logit = [&](int e) {
    const float v = logit_of(e);
    return isnan(v) ? -INFINITY : v;
  };
  const auto candidate = [&](int e, float v) {
    if constexpr (kPacked)
      return packed_candidate<KT>(v, e);
    else
      return order_key(v);
  };
  float cached[kRouteCached];
  uint32_t cached_key[kRouteCached];
#pragma unroll
  for (int i = 0; i < kRouteCached; ++i) {
    const int e = lane + 32 * i;
    cached[i] = e < experts ? logit(e) : -INFINITY;
    cached_key[i] = e < experts ? candidate(e, cached[i]) : 0u;
  }
  // f(e, i, v, key) for each of the lane's experts in increasing order.
  const auto each_expert = [&](auto&& f) {
#pragma unroll
    for (int i = 0; i < kRouteCached; ++i)
      if (lane + 32 * i < experts) f(lane + 32 * i, i, cached[i], cached_key[i]);
    for (int e = lane + 32 * kRouteCached, i = kRouteCached; e < experts; e += 32, ++i) {
      const float v = logit(e);
      f(e, i, v, candidate(e, v));
    }
  };
  stamp(0);

  // Round j leaves its winner with lane j; the lanes turn their winners into probabilities together afterwards (a
  // double exp and division inside the rounds would lengthen every round's chain by theirs).
  uint32_t taken = 0, my_key = 0;
  int my_e = 0;
  float m = 0.0f;
  for (int j = 0; j < top_k; ++j) {
    uint32_t best = 0;  // below every candidate: none yet
    int best_e = INT_MAX;
    each_expert([&](int e, int i, float, uint32_t k) {
      if (!((taken >> i) & 1u) && k > best) best = k, best_e = e;  // increasing e: ties keep the lower id
    });
    const uint32_t top = warp_extreme<true>(best);
    int top_e;
    if constexpr (kPacked) {
      top_e = static_cast<int>(0xFFFFu - (top & 0xFFFFu));
    } else {
      top_e = static_cast<int>(warp_extreme<false>(best == top ? static_cast<uint32_t>(best_e) : 0xFFFFFFFFu));
    }
    if (lane == (top_e & 31)) taken |= 1u << (top_e >> 5);
    if (lane == j) my_key = top, my_e = top_e;
    if (j == 0) {
      if constexpr (kPacked)
        m = packed_value<KT>(top);
      else
        m = key_value(top);
    }
  }
  stamp(1);
  // The softmax's denominator, which renormalised weights (divided by the chosen experts' sum) do not need: it
  // cancels, and leaving it out changes them by double rounding only (never visible in the F32 weights but within
  // 1e-15 of a rounding boundary). Its exps and shuffles were a quarter of the routing chain (session 48).
  double sum = 1.0;
  if (!renormalize) {
    sum = 0.0;
    each_expert([&](int, int, float v, uint32_t) { sum += exp(static_cast<double>(v) - static_cast<double>(m)); });
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  }
  stamp(2);
  float my_value;
  if constexpr (kPacked)
    my_value = packed_value<KT>(my_key);
  else
    my_value = key_value(my_key);
  const double my_p = lane < top_k ? exp(static_cast<double>(my_value) - static_cast<double>(m)) / sum : 0.0;
  stamp(3);
  double chosen = my_p;
  for (int off = 16; off > 0; off >>= 1) chosen += __shfl_xor_sync(0xffffffffu, chosen, off);
  stamp(4);
  if (lane < top_k) {
    ids[t * top_k + lane] = my_e;
    weights[t * top_k + lane] = static_cast<float>(renormalize ? my_p / chosen : my_p);
  }
  stamp(5);
}

template <ElemType T>
__device__ void route_token(const void* logits, int64_t t, int experts, int top_k, bool renormalize, int32_t* ids,
                            float* weights) {
  route_token_with<T>([&](int e) { return load_elem<T>(logits, t * experts + e); }, t, experts, top_k, renormalize, ids,
                      weights);
}

template <ElemType T>
__global__ void route_kernel(const void* logits, int64_t tokens, int experts, int top_k, bool renormalize, int32_t* ids,
                             float* weights) {
  pdl_enter();
  const int64_t t = blockIdx.x * int64_t{kRouteWarps} + threadIdx.x / 32;
  if (t < tokens) route_token<T>(logits, t, experts, top_k, renormalize, ids, weights);
}

// The grouping of launch_moe_align by one block of kAlignThreads threads (a thread per expert in the prefix sums):
// counts per expert, their exclusive prefix sums (rows and tiles), then every slot's row, each row's expert and each
// tile's expert (written by the tile's first row). Shared memory: 3 x experts int32.
constexpr int kAlignThreads = 1024;
static_assert(kMoeMaxExperts <= kAlignThreads, "the prefix sums take one thread per expert");
static_assert(kAlignThreads == 32 * 32, "warp 0 scans one total per warp");

__device__ void align_block(const int32_t* ids, int64_t slots, int64_t top_k, int experts, int64_t tile_m,
                            int32_t* offsets, int32_t* tile_offsets, int32_t* row_token, int32_t* slot_row,
                            int32_t* row_expert, int32_t* tile_expert) {
  extern __shared__ int32_t shared[];
  __shared__ int32_t warp_rows[kAlignThreads / 32], warp_tiles[kAlignThreads / 32];
  int32_t* counts = shared;               // counts, then each expert's first tile
  int32_t* cursor = shared + experts;     // each expert's next row
  int32_t* first_row = cursor + experts;  // each expert's first row
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int e = tid; e < experts; e += kAlignThreads) counts[e] = 0;
  __syncthreads();
  for (int64_t s = tid; s < slots; s += kAlignThreads) atomicAdd(&counts[ids[s]], 1);
  __syncthreads();
  // Inclusive scans of (rows, tiles) over the experts: within each warp, then over the warps' totals.
  const int32_t count = tid < experts ? counts[tid] : 0;
  const int32_t tiles = static_cast<int32_t>((count + tile_m - 1) / tile_m);
  int32_t rows_in = count, tiles_in = tiles;
  for (int off = 1; off < 32; off <<= 1) {
    const int32_t r = __shfl_up_sync(0xffffffffu, rows_in, off), t = __shfl_up_sync(0xffffffffu, tiles_in, off);
    if (lane >= off) rows_in += r, tiles_in += t;
  }
  if (lane == 31) warp_rows[warp] = rows_in, warp_tiles[warp] = tiles_in;
  __syncthreads();
  if (warp == 0) {
    int32_t r = warp_rows[lane], t = warp_tiles[lane];
    for (int off = 1; off < 32; off <<= 1) {
      const int32_t ro = __shfl_up_sync(0xffffffffu, r, off), to = __shfl_up_sync(0xffffffffu, t, off);
      if (lane >= off) r += ro, t += to;
    }
    warp_rows[lane] = r;  // inclusive over warps 0..lane
    warp_tiles[lane] = t;
  }
  __syncthreads();
  if (warp > 0) rows_in += warp_rows[warp - 1], tiles_in += warp_tiles[warp - 1];
  if (tid < experts) {
    offsets[tid] = rows_in - count;
    tile_offsets[tid] = tiles_in - tiles;
    cursor[tid] = first_row[tid] = rows_in - count;
    counts[tid] = tiles_in - tiles;  // only this thread reads or writes entry tid here
    if (tid == experts - 1) {
      offsets[experts] = rows_in;
      tile_offsets[experts] = tiles_in;
    }
  }
  __syncthreads();
  for (int64_t s = tid; s < slots; s += kAlignThreads) {
    const int32_t e = ids[s];
    const int32_t pos = atomicAdd(&cursor[e], 1);
    row_token[pos] = static_cast<int32_t>(s / top_k);
    slot_row[s] = pos;
    row_expert[pos] = e;
    const int64_t within = pos - first_row[e];
    if (within % tile_m == 0) tile_expert[counts[e] + within / tile_m] = e;
  }
}

__global__ void __launch_bounds__(kAlignThreads)
    align_kernel(const int32_t* ids, int64_t slots, int64_t top_k, int experts, int64_t tile_m, int32_t* offsets,
                 int32_t* tile_offsets, int32_t* row_token, int32_t* slot_row, int32_t* row_expert,
                 int32_t* tile_expert) {
  pdl_enter();
  align_block(ids, slots, top_k, experts, tile_m, offsets, tile_offsets, row_token, slot_row, row_expert, tile_expert);
}

// align_block's grouping for at most one warp of slots (decode), with two block barriers instead of five: warp 0 sorts
// the slots by (expert, slot) in registers (a bitonic network over the lanes), so row r is the r-th slot in that order
// (an expert's rows in slot order); the first row of each expert's run gives the expert's tiles, a warp scan their
// first tile; then every thread writes the offsets of its experts by a binary search over the sorted experts. Called
// by every thread of the block, after a block barrier; ids_s as copy_ids_then_align.
constexpr int kAlignWarpSlots = 32;
__device__ void align_warp(const int32_t* ids_s, int32_t* ids, int slots, int64_t top_k, int experts, int64_t tile_m,
                           int32_t* offsets, int32_t* tile_offsets, int32_t* row_token, int32_t* slot_row,
                           int32_t* row_expert, int32_t* tile_expert) {
  __shared__ int32_t sorted_expert[kAlignWarpSlots];   // row r's expert; `experts` past the last row
  __shared__ int32_t first_tile[kAlignWarpSlots + 1];  // at each expert's first row; [slots]: every tile
  const int tid = threadIdx.x;
  if (tid < 32) {
    const int lane = tid;
    const bool valid = lane < slots;
    const int32_t mine = valid ? ids_s[lane] : 0;
    if (valid) ids[lane] = mine;
    // Key (expert, slot): experts < kMoeMaxExperts fit above the 5 slot bits; empty lanes sort last.
    uint32_t key = valid ? (static_cast<uint32_t>(mine) << 5) | static_cast<uint32_t>(lane) : 0xFFFFFFFFu;
    for (int k = 2; k <= 32; k <<= 1)
      for (int j = k >> 1; j > 0; j >>= 1) {
        const uint32_t other = __shfl_xor_sync(0xffffffffu, key, j);
        key = (((lane & j) == 0) == ((lane & k) == 0)) ? min(key, other) : max(key, other);
      }
    const int e = valid ? static_cast<int>(key >> 5) : experts;
    const int s = static_cast<int>(key & 31u);
    const int before = __shfl_up_sync(0xffffffffu, e, 1);
    const bool first = valid && (lane == 0 || before != e);
    const uint32_t firsts = __ballot_sync(0xffffffffu, first);
    int tiles = 0;
    if (first) {
      const uint32_t later = firsts & ~((2u << lane) - 1u);  // lane 31: 2u << 31 is 0, so nothing later
      const int next = later != 0u ? __ffs(static_cast<int>(later)) - 1 : slots;
      tiles = static_cast<int>((next - lane + tile_m - 1) / tile_m);
    }
    int upto = tiles;  // inclusive scan of the tiles over the rows
    for (int off = 1; off < 32; off <<= 1) {
      const int o = __shfl_up_sync(0xffffffffu, upto, off);
      if (lane >= off) upto += o;
    }
    const int start = upto - tiles;
    if (valid) {
      row_token[lane] = static_cast<int32_t>(s / top_k);
      slot_row[s] = lane;
      row_expert[lane] = e;
    }
    for (int i = 0; i < tiles; ++i) tile_expert[start + i] = e;
    sorted_expert[lane] = e;
    if (first) first_tile[lane] = start;
    if (lane == 31) first_tile[slots] = upto;
  }
  __syncthreads();
  for (int e = tid; e <= experts; e += kAlignThreads) {
    int lo = 0, hi = slots;  // the first row whose expert is e or later: an expert's first row, or slots
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (sorted_expert[mid] < e)
        lo = mid + 1;
      else
        hi = mid;
    }
    offsets[e] = lo;
    tile_offsets[e] = first_tile[lo];
  }
}

// The ids of the tokens routed into shared memory (ids_s, from `shared` + 3 · experts: past align_block's part) go to
// the output ids and, without a round trip through global memory, into the grouping (by one warp up to 32 slots).
// After a block barrier.
__device__ void copy_ids_then_align(const int32_t* ids_s, int32_t* ids, int64_t slots, int64_t top_k, int experts,
                                    int64_t tile_m, int32_t* offsets, int32_t* tile_offsets, int32_t* row_token,
                                    int32_t* slot_row, int32_t* row_expert, int32_t* tile_expert) {
  if (slots <= kAlignWarpSlots) {
    align_warp(ids_s, ids, static_cast<int>(slots), top_k, experts, tile_m, offsets, tile_offsets, row_token, slot_row,
               row_expert, tile_expert);
    return;
  }
  for (int64_t s = threadIdx.x; s < slots; s += kAlignThreads) ids[s] = ids_s[s];
  align_block(ids_s, slots, top_k, experts, tile_m, offsets, tile_offsets, row_token, slot_row, row_expert,
              tile_expert);
}

// Both in one block, for few tokens: its warps route the tokens (each warp's ids reach the whole block at the
// barrier), then the block groups them. Dynamic shared memory: 3 · experts + tokens · top_k int32.
template <ElemType T>
__global__ void __launch_bounds__(kAlignThreads)
    route_align_kernel(const void* logits, int64_t tokens, int experts, int top_k, bool renormalize, int64_t tile_m,
                       int32_t* ids, float* weights, int32_t* offsets, int32_t* tile_offsets, int32_t* row_token,
                       int32_t* slot_row, int32_t* row_expert, int32_t* tile_expert) {
  extern __shared__ int32_t shared[];
  int32_t* ids_s = shared + 3 * experts;
  pdl_enter();
  for (int64_t t = threadIdx.x / 32; t < tokens; t += kAlignThreads / 32)
    route_token<T>(logits, t, experts, top_k, renormalize, ids_s, weights);
  __syncthreads();
  copy_ids_then_align(ids_s, ids, tokens * top_k, top_k, experts, tile_m, offsets, tile_offsets, row_token, slot_row,
                      row_expert, tile_expert);
}

// launch_moe_router_route_align. Row r = e · parts + p of the GEMV is part p (a run of `span` 16-byte vectors of
// hidden) of expert e's weight row; warp g of the cluster (block g / 32, warp g % 32) takes rows g, g + warps, ...
// Dynamic shared memory, int32 / float entries (used in block 0): [3 · experts] align_block's, [tokens · rows] the
// partial sums (every block writes its rows there through distributed shared memory), [tokens · experts] the logits
// and [tokens · top_k] the ids.
constexpr int kRouterWarps = kAlignThreads / 32;
constexpr int kRouterClusterWarps = kMoeRouterClusterBlocks * kRouterWarps;
constexpr int kRouterCached = 4;  // a lane's first vectors of a row, requested together (all of a 2048-wide part)

// x rounded to T and back, as the router's linear layer stores its output.
template <ElemType T>
__device__ __forceinline__ float round_to(float x) {
  if constexpr (T == ElemType::BF16)
    return __bfloat162float(__float2bfloat16_rn(x));
  else
    return __half2float(__float2half_rn(x));
}

template <ElemType T>
__global__ void __launch_bounds__(kAlignThreads) router_route_align_kernel(MoeRouterRouteAlignArgs a, int parts) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int tid = threadIdx.x, lane = tid & 31;
  const int rank = static_cast<int>(cluster.block_rank());
  const int E = static_cast<int>(a.experts), T_ = static_cast<int>(a.tokens);
  const int rows = E * parts;
  const int64_t vecs = a.hidden / 8, span = (vecs + parts - 1) / parts;
  extern __shared__ int32_t shared[];
  float* partial = reinterpret_cast<float*>(shared + 3 * E);
  float* logits = partial + T_ * rows;
  const uint4* w = static_cast<const uint4*>(a.w);
  const uint4* x = static_cast<const uint4*>(a.x);
  const int g = rank * kRouterWarps + (tid >> 5);

  // GEMV row r: expert r / parts, the vectors [v0, v1) of its weight row.
  struct RowPart {
    const uint4* row;
    int64_t v0, v1;
  };
  const auto part_of = [&](int r) {
    const int64_t v0 = (r % parts) * span;
    return RowPart{w + static_cast<int64_t>(r / parts) * vecs, v0, min(v0 + span, vecs)};
  };
  uint4 cached[kRouterCached];
  const auto request = [&](int r) {
    const RowPart p = part_of(r);
#pragma unroll
    for (int i = 0; i < kRouterCached; ++i) {
      const int64_t v = p.v0 + lane + 32 * i;
      if (v < p.v1) cached[i] = __ldg(p.row + v);
    }
  };
  const bool probe = a.probe != nullptr && rank == 0 && tid == 0;
  if (probe) a.probe[0] = clock64();
  // Every block's partial sums go straight into block 0's shared memory, which must have started: the first cluster
  // barrier phase, arrived at here and waited for after the weights' requests (long complete by then).
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  if (g < rows) request(g);
  pdl_enter();
  if (probe) a.probe[1] = clock64();
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
  float* partial0 = cluster.map_shared_rank(partial, 0);
  for (int r = g; r < rows; r += kRouterClusterWarps) {
    if (r != g) request(r);
    const auto [row, v0, v1] = part_of(r);
    float acc[kMoeRouterMaxTokens] = {};
#pragma unroll
    for (int i = 0; i < kRouterCached; ++i) {
      const int64_t v = v0 + lane + 32 * i;
      if (v < v1) {
#pragma unroll
        for (int t = 0; t < kMoeRouterMaxTokens; ++t)
          if (t < T_) acc[t] = qlm::cuda::vec_dot_add<typename Elem<T>::type>(cached[i], x[t * vecs + v], acc[t]);
      }
    }
    for (int64_t v = v0 + lane + 32 * kRouterCached; v < v1; v += 32) {
      const uint4 wv = __ldg(row + v);
#pragma unroll
      for (int t = 0; t < kMoeRouterMaxTokens; ++t)
        if (t < T_) acc[t] = qlm::cuda::vec_dot_add<typename Elem<T>::type>(wv, x[t * vecs + v], acc[t]);
    }
#pragma unroll
    for (int t = 0; t < kMoeRouterMaxTokens; ++t) {
      if (t >= T_) break;
      float sum = acc[t];
      for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      if (lane == 0) partial0[t * rows + r] = sum;
    }
  }
  if (probe) a.probe[2] = clock64();
  cluster.sync();  // every block's partial sums written into block 0's shared memory; the others leave
  if (probe) a.probe[3] = clock64();
  if (rank != 0) return;
  for (int i = tid; i < T_ * E; i += kAlignThreads) {
    const int t = i / E, e = i - t * E;
    float sum = 0.0f;
    for (int p = 0; p < parts; ++p) sum += partial[t * rows + e * parts + p];
    logits[i] = round_to<T>(sum);
  }
  if (probe) a.probe[4] = clock64();
  __syncthreads();
  if (probe) a.probe[5] = clock64();
  int32_t* ids_s = reinterpret_cast<int32_t*>(logits + T_ * E);
  for (int t = tid >> 5; t < T_; t += kRouterWarps)
    route_token_with<T>([&](int e) { return logits[t * E + e]; }, t, E, static_cast<int>(a.top_k), a.renormalize, ids_s,
                        a.weights, probe ? a.probe + 8 : nullptr);
  __syncthreads();
  if (probe) a.probe[6] = clock64();
  copy_ids_then_align(ids_s, a.ids, a.tokens * a.top_k, a.top_k, E, a.tile_m, a.offsets, a.tile_offsets, a.row_token,
                      a.slot_row, a.row_expert, a.tile_expert);
  if (probe) a.probe[7] = clock64();
#else
  __trap();  // sm_90 only: the host never launches it elsewhere (moe_router_route_align_ok)
#endif
}

template <ElemType T>
__global__ void gather_rows_kernel(const void* x, const int32_t* row_token, int64_t rows, int64_t width, void* out) {
  pdl_enter();
  const int64_t n = rows * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / width, c = i - r * width;
    store_elem<T>(out, i, load_elem<T>(x, int64_t{row_token[r]} * width + c));
  }
}

// The combine's loads in flight per thread: the rows and weights of kCombineSlots slots, then kCombineSplits
// splits of each of them at once (not a chain of a row and its values per slot, nor one split after another).
constexpr int kCombineSlots = 8, kCombineSplits = 4;

template <ElemType T>
__global__ void combine_kernel(const void* rows, int splits, int64_t rows_total, const int32_t* slot_row,
                               const float* weights, int64_t tokens, int64_t top_k, int64_t width, float* y) {
  pdl_enter();
  const int64_t n = tokens * width;
  const int64_t split_stride = rows_total * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / width, c = i - t * width;
    float acc = 0.0f;
    for (int64_t j0 = 0; j0 < top_k; j0 += kCombineSlots) {
      int64_t row[kCombineSlots];
      float w[kCombineSlots], v[kCombineSlots];
#pragma unroll
      for (int u = 0; u < kCombineSlots; ++u) {
        const bool ok = j0 + u < top_k;
        row[u] = ok ? slot_row[t * top_k + j0 + u] : 0;
        w[u] = ok ? weights[t * top_k + j0 + u] : 0.0f;
        v[u] = 0.0f;
      }
      for (int s0 = 0; s0 < splits; s0 += kCombineSplits) {
        float part[kCombineSlots][kCombineSplits];
#pragma unroll
        for (int u = 0; u < kCombineSlots; ++u)
#pragma unroll
          for (int ds = 0; ds < kCombineSplits; ++ds)
            part[u][ds] = j0 + u < top_k && s0 + ds < splits
                              ? load_elem<T>(rows, (s0 + ds) * split_stride + row[u] * width + c)
                              : 0.0f;
            // Each slot's splits summed in split order, as one load at a time would.
#pragma unroll
        for (int u = 0; u < kCombineSlots; ++u)
#pragma unroll
          for (int ds = 0; ds < kCombineSplits; ++ds)
            if (s0 + ds < splits) v[u] += part[u][ds];
      }
#pragma unroll
      for (int u = 0; u < kCombineSlots; ++u)
        if (j0 + u < top_k) acc = fmaf(w[u], v[u], acc);
    }
    y[i] = acc;
  }
}

template <ElemType S, ElemType G>
__global__ void add_gated_kernel(float* y, const void* shared, const void* gate, int64_t tokens, int64_t width) {
  pdl_enter();
  const int64_t n = tokens * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = load_elem<G>(gate, i / width);
    y[i] += load_elem<S>(shared, i) / (1.0f + expf(-g));
  }
}

constexpr int kBlock = 256;

// The router's limits (launch_moe_route, launch_moe_route_align).
bool routing_args_ok(int64_t experts, int64_t top_k) {
  return experts >= 1 && experts <= kMoeMaxExperts && top_k >= 1 && top_k <= kMoeMaxTopK && top_k <= experts;
}

}  // namespace

cudaError_t launch_moe_route(const void* logits, ElemType type, int64_t tokens, int64_t experts, int64_t top_k,
                             bool renormalize, int32_t* ids, float* weights, cudaStream_t stream) {
  if (!routing_args_ok(experts, top_k)) return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>((tokens + kRouteWarps - 1) / kRouteWarps);
  return dispatch(type, [&](auto tag) {
    launch_pdl(route_kernel<decltype(tag)::value>, grid, kRouteWarps * 32, 0, stream, logits, tokens,
               static_cast<int>(experts), static_cast<int>(top_k), renormalize, ids, weights);
  });
}

cudaError_t launch_moe_align(const int32_t* ids, int64_t slots, int64_t top_k, int64_t experts, int64_t tile_m,
                             int32_t* offsets, int32_t* tile_offsets, int32_t* row_token, int32_t* slot_row,
                             int32_t* row_expert, int32_t* tile_expert, cudaStream_t stream) {
  if (experts < 1 || experts > kMoeMaxExperts || tile_m < 1 || top_k < 1 || slots > INT_MAX)
    return cudaErrorInvalidValue;
  const size_t smem = 3 * static_cast<size_t>(experts) * sizeof(int32_t);
  return launch_pdl(align_kernel, 1, kAlignThreads, smem, stream, ids, slots, top_k, static_cast<int>(experts), tile_m,
                    offsets, tile_offsets, row_token, slot_row, row_expert, tile_expert);
}

cudaError_t launch_moe_route_align(const void* logits, ElemType type, int64_t tokens, int64_t experts, int64_t top_k,
                                   bool renormalize, int64_t tile_m, int32_t* ids, float* weights, int32_t* offsets,
                                   int32_t* tile_offsets, int32_t* row_token, int32_t* slot_row, int32_t* row_expert,
                                   int32_t* tile_expert, cudaStream_t stream) {
  if (!routing_args_ok(experts, top_k) || tile_m < 1 || tokens < 1 || tokens > kMoeRouteAlignMaxTokens)
    return cudaErrorInvalidValue;
  const size_t smem = static_cast<size_t>(3 * experts + tokens * top_k) * sizeof(int32_t);
  return dispatch(type, [&](auto tag) {
    launch_pdl(route_align_kernel<decltype(tag)::value>, 1, kAlignThreads, smem, stream, logits, tokens,
               static_cast<int>(experts), static_cast<int>(top_k), renormalize, tile_m, ids, weights, offsets,
               tile_offsets, row_token, slot_row, row_expert, tile_expert);
  });
}

bool moe_router_route_align_ok(ElemType type, int64_t tokens, int64_t hidden, int64_t experts, int64_t top_k) {
  return (type == ElemType::BF16 || type == ElemType::F16) && tokens >= 1 && tokens <= kMoeRouterMaxTokens &&
         hidden >= 8 && hidden % 8 == 0 && routing_args_ok(experts, top_k) &&
         qlm::cuda::current_device_attribute_at_least<cudaDevAttrClusterLaunch, 1>();
}

cudaError_t launch_moe_router_route_align(const MoeRouterRouteAlignArgs& a, cudaStream_t stream) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!moe_router_route_align_ok(a.type, a.tokens, a.hidden, a.experts, a.top_k) || a.tile_m < 1 || !aligned(a.x) ||
      !aligned(a.w))
    return cudaErrorInvalidValue;
  // Parts per expert row: enough rows for every warp of the cluster, each part at least one vector a lane.
  const int64_t vecs = a.hidden / 8;
  int64_t parts = std::max<int64_t>(1, kRouterClusterWarps / a.experts);
  parts = std::min(parts, std::max<int64_t>(1, vecs / 32));
  const int64_t rows = a.experts * parts;
  const size_t smem = sizeof(int32_t) *
                      static_cast<size_t>(3 * a.experts + a.tokens * rows + a.tokens * a.experts + a.tokens * a.top_k);
  const auto launch = [&](auto kernel) {
    return qlm::cuda::launch_pdl_cluster_if(qlm::cuda::pdl_launches(), kMoeRouterClusterBlocks, kernel,
                                            dim3(kMoeRouterClusterBlocks), dim3(kAlignThreads), smem, stream, a,
                                            static_cast<int>(parts));
  };
  const cudaError_t launched = a.type == ElemType::BF16 ? launch(router_route_align_kernel<ElemType::BF16>)
                                                        : launch(router_route_align_kernel<ElemType::F16>);
  return launched != cudaSuccess ? launched : cudaGetLastError();
}

cudaError_t launch_moe_gather_rows(const void* x, ElemType type, const int32_t* row_token, int64_t rows, int64_t width,
                                   void* out, cudaStream_t stream) {
  if (rows * width == 0) return cudaSuccess;
  return dispatch(type, [&](auto tag) {
    launch_pdl(gather_rows_kernel<decltype(tag)::value>, grid_for(rows * width, kBlock), kBlock, 0, stream, x,
               row_token, rows, width, out);
  });
}

cudaError_t launch_moe_combine(const void* rows, ElemType type, int splits, int64_t rows_total, const int32_t* slot_row,
                               const float* weights, int64_t tokens, int64_t top_k, int64_t width, float* y,
                               cudaStream_t stream) {
  if (splits < 1) return cudaErrorInvalidValue;
  if (tokens * width == 0) return cudaSuccess;
  return dispatch(type, [&](auto tag) {
    launch_pdl(combine_kernel<decltype(tag)::value>, grid_for(tokens * width, kBlock), kBlock, 0, stream, rows, splits,
               rows_total, slot_row, weights, tokens, top_k, width, y);
  });
}

cudaError_t launch_moe_add_gated(float* y, const void* shared, ElemType shared_type, const void* gate,
                                 ElemType gate_type, int64_t tokens, int64_t width, cudaStream_t stream) {
  if (tokens * width == 0) return cudaSuccess;
  cudaError_t inner = cudaSuccess;
  const cudaError_t outer = dispatch(shared_type, [&](auto s) {
    inner = dispatch(gate_type, [&](auto g) {
      launch_pdl(add_gated_kernel<decltype(s)::value, decltype(g)::value>, grid_for(tokens * width, kBlock), kBlock, 0,
                 stream, y, shared, gate, tokens, width);
    });
  });
  return outer != cudaSuccess ? outer : inner;
}

}  // namespace qlm::ops::cu
