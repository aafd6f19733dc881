// The cpu_fast layout of dense weights: the nn.Linear weight [N, K] transposed into column tiles
// [tiles][K][kTileN] (row k of a tile holds W[n0 .. n0+31, k]), kept in its own float type so
// that bf16/f16 weights stream at 2 bytes each. Padded columns are zero.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/wna16_layout.h"

namespace qlm {

struct PackedDense {
  DType dtype = DType::F32;  // F32 (data in f32), BF16 or F16 (data in u16)
  int64_t K = 0, N = 0, tiles = 0;
  AlignedBuffer<float> f32;
  AlignedBuffer<uint16_t> u16;
  size_t weight_bytes() const { return f32.bytes() + u16.bytes(); }
};

// weight: [N, K] F32, BF16 or F16 on CPU (any strides).
PackedDense pack_dense(const Tensor& weight);

}  // namespace qlm
