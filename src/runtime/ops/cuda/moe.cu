// Mixture-of-experts routing kernels: softmax top-k router, grouping by expert, row gather, weighted
// combine, shared-expert gate. Declarations and contracts: moe_launch.h.
#include <climits>

#include "runtime/ops/cuda/elem.cuh"
#include "runtime/ops/cuda/moe_launch.h"

namespace qlm::ops::cu {
namespace {

constexpr int kRouteWarps = 4;

// One warp per token. Lane l holds experts l, l + 32, ...; bit i of `taken` marks expert l + 32 i.
// NaN logits never win (they count as -inf); every token gets top_k distinct experts.
template <ElemType T>
__global__ void route_kernel(const void* logits, int64_t tokens, int experts, int top_k, bool renormalize, int32_t* ids,
                             float* weights) {
  const int lane = threadIdx.x & 31;
  const int64_t t = blockIdx.x * int64_t{kRouteWarps} + threadIdx.x / 32;
  if (t >= tokens) return;
  const int64_t base = t * experts;
  auto logit = [&](int e) {
    const float v = load_elem<T>(logits, base + e);
    return isnan(v) ? -INFINITY : v;
  };
  float m = -INFINITY;
  for (int e = lane; e < experts; e += 32) m = fmaxf(m, logit(e));
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  double sum = 0;
  for (int e = lane; e < experts; e += 32) sum += exp(static_cast<double>(logit(e)) - static_cast<double>(m));
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);

  uint32_t taken = 0;
  double my_p = 0;
  int my_e = 0;
  for (int j = 0; j < top_k; ++j) {
    float best = -INFINITY;
    int best_e = INT_MAX;
    for (int e = lane, i = 0; e < experts; e += 32, ++i) {
      if ((taken >> i) & 1u) continue;
      const float v = logit(e);
      if (best_e == INT_MAX || v > best || (v == best && e < best_e)) best = v, best_e = e;
    }
    for (int off = 16; off > 0; off >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, off);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, off);
      if (oe != INT_MAX && (best_e == INT_MAX || ov > best || (ov == best && oe < best_e))) best = ov, best_e = oe;
    }
    if (lane == (best_e & 31)) taken |= 1u << (best_e >> 5);
    if (lane == j) {
      my_p = exp(static_cast<double>(best) - static_cast<double>(m)) / sum;
      my_e = best_e;
    }
  }
  double chosen = my_p;
  for (int off = 16; off > 0; off >>= 1) chosen += __shfl_xor_sync(0xffffffffu, chosen, off);
  if (lane < top_k) {
    ids[t * top_k + lane] = my_e;
    weights[t * top_k + lane] = static_cast<float>(renormalize ? my_p / chosen : my_p);
  }
}

__global__ void align_kernel(const int32_t* ids, int64_t slots, int64_t top_k, int experts, int64_t tile_m,
                             int32_t* offsets, int32_t* tile_offsets, int32_t* row_token, int32_t* slot_row) {
  extern __shared__ int32_t shared[];
  int32_t* counts = shared;
  int32_t* cursor = shared + experts;
  for (int e = threadIdx.x; e < experts; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for (int64_t s = threadIdx.x; s < slots; s += blockDim.x) atomicAdd(&counts[ids[s]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t row = 0, tile = 0;
    for (int e = 0; e < experts; ++e) {
      offsets[e] = row;
      tile_offsets[e] = tile;
      cursor[e] = row;
      row += counts[e];
      tile += static_cast<int32_t>((counts[e] + tile_m - 1) / tile_m);
    }
    offsets[experts] = row;
    tile_offsets[experts] = tile;
  }
  __syncthreads();
  for (int64_t s = threadIdx.x; s < slots; s += blockDim.x) {
    const int32_t pos = atomicAdd(&cursor[ids[s]], 1);
    row_token[pos] = static_cast<int32_t>(s / top_k);
    slot_row[s] = pos;
  }
}

template <ElemType T>
__global__ void gather_rows_kernel(const void* x, const int32_t* row_token, int64_t rows, int64_t width, void* out) {
  const int64_t n = rows * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / width, c = i - r * width;
    store_elem<T>(out, i, load_elem<T>(x, int64_t{row_token[r]} * width + c));
  }
}

template <ElemType T>
__global__ void combine_kernel(const void* rows, int splits, int64_t rows_total, const int32_t* slot_row,
                               const float* weights, int64_t tokens, int64_t top_k, int64_t width, float* y) {
  const int64_t n = tokens * width;
  const int64_t split_stride = rows_total * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / width, c = i - t * width;
    float acc = 0.0f;
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t row = slot_row[t * top_k + j];
      float v = 0.0f;
      for (int s = 0; s < splits; ++s) v += load_elem<T>(rows, s * split_stride + row * width + c);
      acc = fmaf(weights[t * top_k + j], v, acc);
    }
    y[i] = acc;
  }
}

template <ElemType S, ElemType G>
__global__ void add_gated_kernel(float* y, const void* shared, const void* gate, int64_t tokens, int64_t width) {
  const int64_t n = tokens * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = load_elem<G>(gate, i / width);
    y[i] += load_elem<S>(shared, i) / (1.0f + expf(-g));
  }
}

constexpr int kBlock = 256;

}  // namespace

cudaError_t launch_moe_route(const void* logits, ElemType type, int64_t tokens, int64_t experts, int64_t top_k,
                             bool renormalize, int32_t* ids, float* weights, cudaStream_t stream) {
  if (experts < 1 || experts > kMoeMaxExperts || top_k < 1 || top_k > kMoeMaxTopK || top_k > experts)
    return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>((tokens + kRouteWarps - 1) / kRouteWarps);
  return dispatch(type, [&](auto tag) {
    route_kernel<decltype(tag)::value><<<grid, kRouteWarps * 32, 0, stream>>>(
        logits, tokens, static_cast<int>(experts), static_cast<int>(top_k), renormalize, ids, weights);
  });
}

cudaError_t launch_moe_align(const int32_t* ids, int64_t slots, int64_t top_k, int64_t experts, int64_t tile_m,
                             int32_t* offsets, int32_t* tile_offsets, int32_t* row_token, int32_t* slot_row,
                             cudaStream_t stream) {
  if (experts < 1 || experts > kMoeMaxExperts || tile_m < 1 || top_k < 1 || slots > INT_MAX)
    return cudaErrorInvalidValue;
  const size_t smem = 2 * static_cast<size_t>(experts) * sizeof(int32_t);
  align_kernel<<<1, 1024, smem, stream>>>(ids, slots, top_k, static_cast<int>(experts), tile_m, offsets, tile_offsets,
                                          row_token, slot_row);
  return cudaGetLastError();
}

cudaError_t launch_moe_gather_rows(const void* x, ElemType type, const int32_t* row_token, int64_t rows, int64_t width,
                                   void* out, cudaStream_t stream) {
  if (rows * width == 0) return cudaSuccess;
  return dispatch(type, [&](auto tag) {
    gather_rows_kernel<decltype(tag)::value>
        <<<grid_for(rows * width, kBlock), kBlock, 0, stream>>>(x, row_token, rows, width, out);
  });
}

cudaError_t launch_moe_combine(const void* rows, ElemType type, int splits, int64_t rows_total, const int32_t* slot_row,
                               const float* weights, int64_t tokens, int64_t top_k, int64_t width, float* y,
                               cudaStream_t stream) {
  if (splits < 1) return cudaErrorInvalidValue;
  if (tokens * width == 0) return cudaSuccess;
  return dispatch(type, [&](auto tag) {
    combine_kernel<decltype(tag)::value><<<grid_for(tokens * width, kBlock), kBlock, 0, stream>>>(
        rows, splits, rows_total, slot_row, weights, tokens, top_k, width, y);
  });
}

cudaError_t launch_moe_add_gated(float* y, const void* shared, ElemType shared_type, const void* gate,
                                 ElemType gate_type, int64_t tokens, int64_t width, cudaStream_t stream) {
  if (tokens * width == 0) return cudaSuccess;
  cudaError_t inner = cudaSuccess;
  const cudaError_t outer = dispatch(shared_type, [&](auto s) {
    inner = dispatch(gate_type, [&](auto g) {
      add_gated_kernel<decltype(s)::value, decltype(g)::value>
          <<<grid_for(tokens * width, kBlock), kBlock, 0, stream>>>(y, shared, gate, tokens, width);
    });
  });
  return outer != cudaSuccess ? outer : inner;
}

}  // namespace qlm::ops::cu
