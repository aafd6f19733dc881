// The standard form every weight-only integer format is converted to before a kernel repacks it
// (after tensor-parallel slicing). GPTQ is already in it; AWQ and compressed-tensors are converted.
// Invariant: real weight W[k, n] = (code(k, n) - zero(group(k), n)) * scales[group(k), n], where
//   code(k, n) = field k of column n of qweight (sequential along K, 3-bit across words),
//   zero = zeros[g, n] when zeros is defined, else weight_type.bias,
//   group(k) = g_idx[k] when g_idx is defined, else k / group_size.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace qlm {

struct WNA16Weights {
  PackedIntType weight_type = kUint4b8;  // bits; bias is the implied zero when zeros is undefined
  int64_t K = 0;                         // rows (input features) of this partition
  int64_t N = 0;                         // columns (output features) of this partition
  int64_t group_size = 0;                // > 0; equals K (full K when replicated) for channelwise
  Tensor qweight;  // I32 [ceil(K*bits/32), N], GPTQ layout
  Tensor scales;   // F32 [num_groups, N] (exact conversion of the checkpoint's f16/bf16/f32)
  Tensor zeros;    // I32 [num_groups, N] true zero points, or undefined
  Tensor g_idx;    // I32 [K] group of each row, or undefined
  int64_t num_groups() const { return scales.defined() ? scales.size(0) : 0; }
};

}  // namespace qlm
