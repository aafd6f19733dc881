// Device helpers shared by the grouped WNA16 MoE kernels (moe_wna16_kernels.cu, moe_wna16_mma_kernels.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qlm::cuda {

// The largest e in [0, n) with bounds[e] <= value (bounds non-decreasing, bounds[n] > value): the expert of a
// row (bounds = offsets) or of a row tile (bounds = tile_offsets).
__device__ __forceinline__ int find_expert(const int32_t* bounds, int n, int64_t value) {
  int lo = 0, hi = n;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (__ldg(bounds + mid) <= value)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

}  // namespace qlm::cuda
