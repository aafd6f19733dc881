// The weighted combine of one output element of a mixture-of-experts layer, shared by the combine kernel
// (runtime/ops/cuda/moe.cu) and the tensor-core GEMM that folds the combine in (moe_wna16_mma_kernels.cu), so both
// sum in the same order and give the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qlm::cuda {

// sum over the token's top_k slots j (in order) of weights[j] * (sum over splits s (in order) of load(s, slot_row[j]))
// with fmaf for the weight: slot_row and weights point at the token's first slot; load(s, row) reads split s of the
// element in row `row`. Loads in flight per thread: the rows and weights of kCombineSlots slots, then kCombineSplits
// splits of each of them at once (not a chain of a row and its values per slot, nor one split after another); the
// batch sizes change the registers, not the order of the sums (nor the bits).
template <int kCombineSlots = 8, int kCombineSplits = 4, typename Load>
__device__ __forceinline__ float combine_element(const int32_t* slot_row, const float* weights, int64_t top_k,
                                                 int splits, Load&& load) {
  float acc = 0.0f;
  for (int64_t j0 = 0; j0 < top_k; j0 += kCombineSlots) {
    int64_t row[kCombineSlots];
    float w[kCombineSlots], v[kCombineSlots];
#pragma unroll
    for (int u = 0; u < kCombineSlots; ++u) {
      const bool ok = j0 + u < top_k;
      row[u] = ok ? slot_row[j0 + u] : 0;
      w[u] = ok ? weights[j0 + u] : 0.0f;
      v[u] = 0.0f;
    }
    for (int s0 = 0; s0 < splits; s0 += kCombineSplits) {
      float part[kCombineSlots][kCombineSplits];
#pragma unroll
      for (int u = 0; u < kCombineSlots; ++u) {
#pragma unroll
        for (int ds = 0; ds < kCombineSplits; ++ds)
          part[u][ds] = j0 + u < top_k && s0 + ds < splits ? load(s0 + ds, row[u]) : 0.0f;
      }
      // Each slot's splits summed in split order, as one load at a time would.
#pragma unroll
      for (int u = 0; u < kCombineSlots; ++u) {
#pragma unroll
        for (int ds = 0; ds < kCombineSplits; ++ds)
          if (s0 + ds < splits) v[u] += part[u][ds];
      }
    }
#pragma unroll
    for (int u = 0; u < kCombineSlots; ++u)
      if (j0 + u < top_k) acc = fmaf(w[u], v[u], acc);
  }
  return acc;
}

}  // namespace qlm::cuda
