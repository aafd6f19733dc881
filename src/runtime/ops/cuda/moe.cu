// Mixture-of-experts routing kernels: softmax top-k router, grouping by expert, row gather, weighted
// combine, shared-expert gate. Declarations and contracts: moe_launch.h.
#include <climits>

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

// Token t's experts and weights, by one warp. Lane l holds experts l, l + 32, ...; bit i of `taken` marks expert
// l + 32 i. NaN logits never win (they count as -inf); every token gets top_k distinct experts, in order of
// decreasing logit, ties to the lower expert id. Each round takes the warp's largest key and, among the lanes
// holding it, the lowest expert id (two redux instructions instead of five shuffle rounds).
template <ElemType T>
__device__ void route_token(const void* logits, int64_t t, int experts, int top_k, bool renormalize, int32_t* ids,
                            float* weights) {
  const int lane = threadIdx.x & 31;
  const int64_t base = t * experts;
  auto logit = [&](int e) {
    const float v = load_elem<T>(logits, base + e);
    return isnan(v) ? -INFINITY : v;
  };
  float cached[kRouteCached];
#pragma unroll
  for (int i = 0; i < kRouteCached; ++i) cached[i] = lane + 32 * i < experts ? logit(lane + 32 * i) : -INFINITY;
  // f(e, i, v) for each of the lane's experts in increasing order.
  const auto each_expert = [&](auto&& f) {
#pragma unroll
    for (int i = 0; i < kRouteCached; ++i)
      if (lane + 32 * i < experts) f(lane + 32 * i, i, cached[i]);
    for (int e = lane + 32 * kRouteCached, i = kRouteCached; e < experts; e += 32, ++i) f(e, i, logit(e));
  };
  uint32_t lane_max = 0;
  each_expert([&](int, int, float v) { lane_max = max(lane_max, order_key(v)); });
  const float m = key_value(warp_extreme<true>(lane_max));
  double sum = 0;
  each_expert([&](int, int, float v) { sum += exp(static_cast<double>(v) - static_cast<double>(m)); });
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);

  uint32_t taken = 0;
  double my_p = 0;
  int my_e = 0;
  for (int j = 0; j < top_k; ++j) {
    uint32_t best = 0;  // below every logit's key: none yet
    int best_e = INT_MAX;
    each_expert([&](int e, int i, float v) {
      const uint32_t k = order_key(v);
      if (!((taken >> i) & 1u) && k > best) best = k, best_e = e;  // increasing e: ties keep the lower id
    });
    const uint32_t top = warp_extreme<true>(best);
    const int top_e = static_cast<int>(warp_extreme<false>(best == top ? static_cast<uint32_t>(best_e) : 0xFFFFFFFFu));
    if (lane == (top_e & 31)) taken |= 1u << (top_e >> 5);
    if (lane == j) {
      my_p = exp(static_cast<double>(key_value(top)) - static_cast<double>(m)) / sum;
      my_e = top_e;
    }
  }
  double chosen = my_p;
  for (int off = 16; off > 0; off >>= 1) chosen += __shfl_xor_sync(0xffffffffu, chosen, off);
  if (lane < top_k) {
    ids[t * top_k + lane] = my_e;
    weights[t * top_k + lane] = static_cast<float>(renormalize ? my_p / chosen : my_p);
  }
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

// Both in one block, for few tokens: its warps route the tokens (each warp's ids reach the whole block at the
// barrier), then the block groups them.
template <ElemType T>
__global__ void __launch_bounds__(kAlignThreads)
    route_align_kernel(const void* logits, int64_t tokens, int experts, int top_k, bool renormalize, int64_t tile_m,
                       int32_t* ids, float* weights, int32_t* offsets, int32_t* tile_offsets, int32_t* row_token,
                       int32_t* slot_row, int32_t* row_expert, int32_t* tile_expert) {
  pdl_enter();
  for (int64_t t = threadIdx.x / 32; t < tokens; t += kAlignThreads / 32)
    route_token<T>(logits, t, experts, top_k, renormalize, ids, weights);
  __syncthreads();
  align_block(ids, tokens * top_k, top_k, experts, tile_m, offsets, tile_offsets, row_token, slot_row, row_expert,
              tile_expert);
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
  const size_t smem = 3 * static_cast<size_t>(experts) * sizeof(int32_t);
  return dispatch(type, [&](auto tag) {
    launch_pdl(route_align_kernel<decltype(tag)::value>, 1, kAlignThreads, smem, stream, logits, tokens,
               static_cast<int>(experts), static_cast<int>(top_k), renormalize, tile_m, ids, weights, offsets,
               tile_offsets, row_token, slot_row, row_expert, tile_expert);
  });
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
